package webhookbody

import (
	"reflect"
	"time"
)

// ZeroFields lists the fields of v, at any depth, left at their zero value
// (as "Body.Transition.Kill"). Tests use it to check that a sample or an
// encoder covers every field, so a new field cannot go unencoded.
func ZeroFields(v any) []string {
	var out []string
	zeroFields(reflect.ValueOf(v), reflect.TypeOf(v).Name(), &out)
	return out
}

func zeroFields(v reflect.Value, path string, out *[]string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			*out = append(*out, path)
			return
		}
		zeroFields(v.Elem(), path, out)
	case reflect.Struct:
		if t, ok := v.Interface().(time.Time); ok {
			if t.IsZero() {
				*out = append(*out, path)
			}
			return
		}
		for i := 0; i < v.NumField(); i++ {
			zeroFields(v.Field(i), path+"."+v.Type().Field(i).Name, out)
		}
	default:
		if v.IsZero() {
			*out = append(*out, path)
		}
	}
}
