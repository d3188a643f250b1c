package loopdetect

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"
)

// renamedKey is a setting that sat at the top level before every rule had
// a key of its own: the old key, still read for one release, and the new
// key path (dot-separated, as the YAML nests it).
type renamedKey struct {
	old, new string
}

// renamedKeys are the flat keys the configuration still reads. Three of
// them (terminal_reread, backstop, hysteresis) became their rule's key:
// there the old form is a value where the new one is a map.
var renamedKeys = []renamedKey{
	{"max_period", "periodic_loop.max_period"},
	{"min_repetitions", "periodic_loop.min_repetitions"},
	{"name_only_threshold", "name_only.threshold"},
	{"terminal_reread", "terminal_reread.enabled"},
	{"backstop", "backstop.max_duration"},
	{"hysteresis", "hysteresis.evaluations"},
}

// Unmarshal decodes conf into c after moving each old flat key to its new
// place, so the scalar checks (checkScalars) and the decoder see only the
// new shape; the old keys used are kept for warnDeprecated, since the
// configuration has no logger.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	used, err := moveRenamedKeys(conf)
	if err != nil {
		return err
	}
	if err := checkScalars(conf, reflect.TypeOf(c).Elem(), ""); err != nil {
		return err
	}
	if err := conf.Unmarshal(c); err != nil {
		return err
	}
	c.deprecated = used
	return nil
}

// moveRenamedKeys rewrites conf's old flat keys into the new shape and
// returns the ones it moved. An old key beside its new key is an error,
// not a silent choice between two values of one setting.
func moveRenamedKeys(conf *confmap.Conf) ([]renamedKey, error) {
	var used []renamedKey
	var errs []error
	for _, k := range renamedKeys {
		if !conf.IsSet(k.old) {
			continue
		}
		v := conf.Get(k.old)
		if _, isMap := v.(map[string]any); isMap {
			continue // the new shape under the same key: backstop: {max_duration: 2h}
		}
		path := strings.ReplaceAll(k.new, ".", confmap.KeyDelimiter)
		if conf.IsSet(path) {
			errs = append(errs, fmt.Errorf("%s and %s are both set: they are one setting, keep %s and remove %s (deprecated)", k.old, k.new, k.new, k.old))
			continue
		}
		conf.Delete(k.old)
		parent, leaf, _ := strings.Cut(k.new, ".")
		if err := conf.Merge(confmap.NewFromStringMap(map[string]any{parent: map[string]any{leaf: v}})); err != nil {
			return nil, err
		}
		used = append(used, k)
	}
	return used, errors.Join(errs...)
}

// warnDeprecated logs one warning per old key the configuration used,
// naming the key that replaces it.
func (c *Config) warnDeprecated(logger *zap.Logger) {
	for _, k := range c.deprecated {
		logger.Warn(fmt.Sprintf("loop_detect: %s is deprecated and will not be read after the next release: set %s instead", k.old, k.new),
			zap.String("deprecated_key", k.old), zap.String("key", k.new))
	}
}
