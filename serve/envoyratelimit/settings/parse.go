package settings

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// The parsers below follow kelseyhightower/envconfig v1.4.0, which
// envoyproxy/ratelimit uses: a value set to "" is parsed, so an empty
// boolean, integer or duration is malformed.

type parser func(*Settings, string) error

func str(field func(*Settings) *string) parser {
	return func(s *Settings, v string) error { *field(s) = v; return nil }
}

func boolean(field func(*Settings) *bool) parser {
	return func(s *Settings, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("not a boolean (true, false, 1, 0, t, f)")
		}
		if field != nil {
			*field(s) = b
		}
		return nil
	}
}

func integer(bits int, field func(*Settings) *int) parser {
	return func(s *Settings, v string) error {
		n, err := strconv.ParseInt(v, 0, bits)
		if err != nil {
			return fmt.Errorf("not an integer of %d bits", bits)
		}
		if field != nil {
			*field(s) = int(n)
		}
		return nil
	}
}

func port(field func(*Settings) *int) parser {
	return func(s *Settings, v string) error {
		n, err := strconv.ParseInt(v, 0, 64)
		if err != nil || n < 0 || n > 65535 {
			return errors.New("not a port number (0 to 65535)")
		}
		*field(s) = int(n)
		return nil
	}
}

func duration(field func(*Settings) *time.Duration) parser {
	return func(s *Settings, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return errors.New(`not a duration (such as "10s", "1h", "500us")`)
		}
		if field != nil {
			*field(s) = d
		}
		return nil
	}
}

func float(bits int) parser {
	return func(_ *Settings, v string) error {
		if _, err := strconv.ParseFloat(v, bits); err != nil {
			return errors.New("not a number")
		}
		return nil
	}
}

// stringMap validates envconfig's map form: "k1:v1,k2:v2".
func stringMap(_ *Settings, v string) error {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	for pair := range strings.SplitSeq(v, ",") {
		if len(strings.Split(pair, ":")) != 2 {
			return fmt.Errorf("invalid map item %q (want key:value,key:value)", pair)
		}
	}
	return nil
}

func oneOf(field func(*Settings) *string, fold bool, values ...string) parser {
	return func(s *Settings, v string) error {
		for _, want := range values {
			if v == want || fold && strings.EqualFold(v, want) {
				if field != nil {
					*field(s) = v
					if fold {
						*field(s) = want
					}
				}
				return nil
			}
		}
		return fmt.Errorf("not one of %s", strings.Join(values, ", "))
	}
}

func logLevel(s *Settings, v string) error {
	if _, err := parseLevel(v); err != nil {
		return err
	}
	s.LogLevel = v
	return nil
}

// parseLevel reads a level as logrus.ParseLevel does (any case).
func parseLevel(v string) (slog.Level, error) {
	switch strings.ToLower(v) {
	case "trace", "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error", "fatal", "panic":
		return slog.LevelError, nil
	}
	return slog.LevelInfo, errors.New("not a log level (trace, debug, info, warn, error, fatal, panic)")
}

// refuseTrue refuses a boolean set to true.
func refuseTrue(why string) func(string) string {
	return func(v string) string {
		if b, _ := strconv.ParseBool(v); b {
			return why
		}
		return ""
	}
}

// refuseNonEmpty refuses any value but the empty string.
func refuseNonEmpty(why string) func(string) string {
	return func(v string) string {
		if strings.TrimSpace(v) != "" {
			return why
		}
		return ""
	}
}
