// Package canon turns a tool call's evidence into digests that ignore what
// changes from call to call without changing the call: its arguments and
// result canonicalized (key order, whitespace, nulls, volatile keys and
// framework wrappers ignored) and a failure's text with its ids, times and
// durations masked. It knows nothing of the detection engine: it returns
// plain values, which the extractor hands on to the engine as its digests.
package canon
