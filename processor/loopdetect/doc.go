// Package loopdetect is the loop_detect traces processor: it recognises AI
// agents' tool-call spans, runs the detection engine per session, and adds
// a transition event to the span that changed a session's state.
package loopdetect
