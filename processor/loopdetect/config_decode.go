package loopdetect

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"
)

var (
	durationType        = reflect.TypeFor[time.Duration]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// Unmarshal decodes conf into c. It first checks every scalar the YAML sets
// (durations, numbers, booleans) against its field, because the decoder's
// own errors leave the value out ("'backstop' time: unknown unit"): a user
// who wrote `backstop: 2 hours` should read the key, the value and what
// would have been accepted.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	if err := checkScalars(conf, reflect.TypeOf(c).Elem(), ""); err != nil {
		return err
	}
	return conf.Unmarshal(c)
}

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
	case t.Kind() == reflect.Slice && reflect.PointerTo(t.Elem()).Implements(textUnmarshalerType):
		return checkTexts(t.Elem(), key, v)
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

// checkTexts reports the first element of v, a YAML list at key, that a t
// (a type read from text, such as a reason code) does not accept, with the
// type's own message: the decoder would bury it under two wrappers.
func checkTexts(t reflect.Type, key string, v any) error {
	list, ok := v.([]any)
	if !ok {
		return nil // not a list: the decoder says so
	}
	for _, item := range list {
		s, ok := item.(string)
		if !ok {
			continue
		}
		if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}
