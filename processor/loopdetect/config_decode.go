package loopdetect

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"
)

var durationType = reflect.TypeFor[time.Duration]()

// The decoder's own errors for a scalar of the wrong kind leave the value
// out ("'backstop.max_duration' time: missing unit in duration", "'history_size'
// expected type 'int', got unconvertible type 'string'"), and it truncates a
// fraction given for a count (frequent_identical.threshold: 4.5 becomes 4)
// without a word. Unmarshal therefore checks every scalar the YAML sets
// against its field first, so that a user who wrote `max_duration: 2 hours`
// reads the key, the value and what would have been accepted.

// checkScalars walks t's mapstructure fields under prefix (a confmap key
// path, "::"-separated) and returns the first value of the wrong kind.
func checkScalars(conf *confmap.Conf, t reflect.Type, prefix string) error {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if opts == "squash" {
			// Its keys are this level's (the engine's and the rules' settings).
			if err := checkScalars(conf, f.Type, prefix); err != nil {
				return err
			}
			continue
		}
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		key := prefix + name
		if !conf.IsSet(key) {
			continue
		}
		v := conf.Get(key)
		if v == nil {
			continue
		}
		if err := checkScalar(f.Type, strings.ReplaceAll(key, confmap.KeyDelimiter, "."), v); err != nil {
			return err
		}
		if f.Type.Kind() == reflect.Struct && f.Type != durationType {
			if _, isMap := v.(map[string]any); isMap {
				if err := checkScalars(conf, f.Type, key+confmap.KeyDelimiter); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkScalar reports v, the YAML value at key, if it cannot become a t.
func checkScalar(t reflect.Type, key string, v any) error {
	switch {
	case t == durationType:
		switch x := v.(type) {
		case string:
			if _, err := time.ParseDuration(x); err != nil {
				return fmt.Errorf("%s: %q is not a duration: write a number and a unit without a space, e.g. 90s, 30m, 2h", key, x)
			}
		case int, int64, uint64, time.Duration:
			// Nanoseconds, as the decoder reads them; a Duration as
			// confmap.Marshal writes it.
		default:
			return fmt.Errorf("%s: %v is not a duration: write a number and a unit, e.g. 90s, 30m, 2h", key, v)
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		switch x := v.(type) {
		case int, int64, uint64:
		case float64:
			if x != float64(int64(x)) {
				return fmt.Errorf("%s: %v is not a whole number", key, x)
			}
		default:
			return fmt.Errorf("%s: %q is not a whole number", key, fmt.Sprint(v))
		}
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		switch v.(type) {
		case int, int64, uint64, float64:
		default:
			return fmt.Errorf("%s: %q is not a number", key, fmt.Sprint(v))
		}
	case t.Kind() == reflect.Bool:
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: %q is not true or false", key, fmt.Sprint(v))
		}
	}
	return nil
}
