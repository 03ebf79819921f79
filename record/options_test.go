package record

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTableOptions(t *testing.T) {
	opts := TableOptions()
	if !slices.IsSortedFunc(opts, func(a, b OptionDef) int { return strings.Compare(a.Key, b.Key) }) {
		t.Fatal("TableOptions is not sorted by key")
	}
	for _, o := range opts {
		t.Run(o.Key, func(t *testing.T) {
			if !strings.HasPrefix(o.Key, TablePrefix) {
				t.Errorf("key lacks the %q prefix", TablePrefix)
			}
			if o.Description == "" {
				t.Error("no description")
			}
			if (o.Type == OptionEnum) != (len(o.Values) > 0) {
				t.Errorf("type %s with values %v", o.Type, o.Values)
			}
			d, ok := OptionDefault(o.Key)
			if ok != o.HasDefault || d != o.Default {
				t.Errorf("OptionDefault = %q, %v; def has %q, %v", d, ok, o.Default, o.HasDefault)
			}
			if o.HasDefault {
				if reason := o.checkValue(o.Default); reason != "" {
					t.Errorf("the default %q is not a valid value: %s", o.Default, reason)
				}
			} else if o.Default != "" {
				t.Errorf("Default %q without HasDefault", o.Default)
			}
			got, ok := LookupOption(o.Key)
			if !ok || got.Key != o.Key {
				t.Errorf("LookupOption = %v, %v", got, ok)
			}
		})
	}
	// Fluss's defaults for the options the data plane depends on.
	for key, want := range map[string]string{
		OptLogTTL:                     "7 d",
		OptLogFormat:                  "ARROW",
		OptLogArrowCompressionType:    "ZSTD",
		OptLogArrowZstdLevel:          "3",
		OptKvFormat:                   "COMPACTED",
		OptChangelogImage:             "FULL",
		OptDeleteBehavior:             "ALLOW",
		OptLogTieredLocalSegments:     "2",
		OptAutoPartitionTimeUnit:      "DAY",
		OptAutoPartitionNumPrecreate:  "2",
		OptAutoPartitionNumRetention:  "7",
		OptDatalakeFreshness:          "3 min",
		OptAutoIncrementCacheSize:     "100000",
		OptAutoPartitionEnabled:       "false",
		OptDatalakeEnabled:            "false",
		OptDatalakeAutoCompaction:     "false",
		OptDatalakeAutoExpireSnapshot: "false",
	} {
		if got, ok := OptionDefault(key); !ok || got != want {
			t.Errorf("OptionDefault(%s) = %q, %v; want %q", key, got, ok, want)
		}
	}
	for _, key := range []string{OptMergeEngine, OptReplicationFactor, OptAutoPartitionTimeZone, "table.nope", "bucket.num"} {
		if got, ok := OptionDefault(key); ok {
			t.Errorf("OptionDefault(%s) = %q, want none", key, got)
		}
	}
	// The returned slice is a copy.
	opts[0].Key = "changed"
	opts[len(opts)-1].Values = append(opts[len(opts)-1].Values[:0], "X")
	if TableOptions()[0].Key == "changed" {
		t.Error("TableOptions returned shared state")
	}
	if o, _ := LookupOption(OptLogFormat); o.Values[0] != "ARROW" {
		t.Error("LookupOption returned shared state")
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"7 d", 7 * 24 * time.Hour, ""},
		{"7d", 7 * 24 * time.Hour, ""},
		{"7days", 7 * 24 * time.Hour, ""},
		{"1 DAY", 24 * time.Hour, ""},
		{"168h", 168 * time.Hour, ""},
		{"2 hours", 2 * time.Hour, ""},
		{"3min", 3 * time.Minute, ""},
		{"3 m", 3 * time.Minute, ""},
		{"3 minutes", 3 * time.Minute, ""},
		{"10s", 10 * time.Second, ""},
		{"10 secs", 10 * time.Second, ""},
		{"10 seconds", 10 * time.Second, ""},
		{"500ms", 500 * time.Millisecond, ""},
		{"500 millis", 500 * time.Millisecond, ""},
		{"500", 500 * time.Millisecond, ""},
		{"  42  ", 42 * time.Millisecond, ""},
		{"0", 0, ""},
		{"5µs", 5 * time.Microsecond, ""},
		{"5 micros", 5 * time.Microsecond, ""},
		{"5ns", 5, ""},
		{"5 nanoseconds", 5, ""},
		{"", 0, "duration is empty"},
		{"d", 0, "must start with a non-negative whole number"},
		{"-1 d", 0, "must start with a non-negative whole number"},
		{"1.5h", 0, `unknown time unit ".5h"`},
		{"7 weeks", 0, `unknown time unit "weeks"`},
		{"3 mins", 0, `unknown time unit "mins"`},
		{"PT10M", 0, "must start with a non-negative whole number"},
		{"106752 d", 0, "too long a duration"},
		{"99999999999999999999999 ms", 0, "too long a duration"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDuration(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseDuration(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseMemorySize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{"256mb", 256 << 20, ""},
		{"256 MB", 256 << 20, ""},
		{"4kb", 4 << 10, ""},
		{"4 k", 4 << 10, ""},
		{"1g", 1 << 30, ""},
		{"2 gibibytes", 2 << 30, ""},
		{"1tb", 1 << 40, ""},
		{"10", 10, ""},
		{"10 bytes", 10, ""},
		{"1b", 1, ""},
		{"", 0, "memory size is empty"},
		{"mb", 0, "must start with a non-negative whole number"},
		{"1.5mb", 0, `unknown memory unit ".5mb"`},
		{"3 pb", 0, `unknown memory unit "pb"`},
		{"8388608tb", 0, "too large a memory size"},
		{"9223372036854775807", 1<<63 - 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMemorySize(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseMemorySize(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseMemorySize(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestSuggestOption(t *testing.T) {
	tests := []struct{ in, want string }{
		{"table.log.tll", OptLogTTL},
		{"table.logs.ttl", OptLogTTL},
		{"table.log.format.type", OptLogFormat},
		{"table.merge.engine", OptMergeEngine},
		{"table.changelog-image", OptChangelogImage},
		{"table.replication-factor", OptReplicationFactor},
		{"table.ttl", OptLogTTL},
		{"table.log.arrow.compression", OptLogArrowCompressionType},
		{"table.zzzzzzzzzzzzzzzzzz", ""},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := suggestOption(tc.in); got != tc.want {
				t.Fatalf("suggestOption(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
