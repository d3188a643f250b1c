// Package decodedepth holds the test that derives decode_guard's default
// max_depth from the pdata release otelcol-loop ships (v1.71.0), whose
// protobuf decoder refuses values nested 100 messages deep. It lives in
// the root module because extension/decodeguard is a module of its own
// pinned to the gateway's older pdata (v1.67.0), whose decoder has no such
// limit: there the derivation would never end.
package decodedepth
