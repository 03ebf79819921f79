package record

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Option value types, named as Fluss's documentation names them.
const (
	OptionBoolean    = "Boolean"
	OptionInteger    = "Integer" // 32-bit
	OptionLong       = "Long"    // 64-bit
	OptionDuration   = "Duration"
	OptionMemorySize = "MemorySize"
	OptionString     = "String"
	OptionEnum       = "Enum"
)

// TablePrefix starts the key of every table option. Properties with other
// keys are custom properties: stored with the table, never interpreted.
const TablePrefix = "table."

// OptionDef describes one table option.
type OptionDef struct {
	// Key is the option's name, e.g. "table.log.ttl".
	Key string
	// Type is one of the Option* type names.
	Type string
	// Default is Fluss's default, spelled as Fluss prints it ("7 d",
	// "ARROW"); "" when HasDefault is false.
	Default string
	// HasDefault is false for options that are unset unless given.
	HasDefault bool
	// Values lists the allowed values of an Enum option, in Fluss's
	// spelling; matching is case-insensitive, as in Fluss.
	Values []string
	// Min and Max bound Integer and Long options (inclusive) when Bounded.
	Min, Max int64
	Bounded  bool
	// PrimaryKeyOnly options are rejected on log tables.
	PrimaryKeyOnly bool
	// Description says what the option does.
	Description string
}

// Table option keys, one constant per option Strom knows.
const (
	OptAutoIncrementCacheSize     = "table.auto-increment.cache-size"
	OptAutoPartitionEnabled       = "table.auto-partition.enabled"
	OptAutoPartitionKey           = "table.auto-partition.key"
	OptAutoPartitionNumPrecreate  = "table.auto-partition.num-precreate"
	OptAutoPartitionNumRetention  = "table.auto-partition.num-retention"
	OptAutoPartitionTimeUnit      = "table.auto-partition.time-unit"
	OptAutoPartitionTimeZone      = "table.auto-partition.time-zone"
	OptChangelogImage             = "table.changelog.image"
	OptDatalakeAutoCompaction     = "table.datalake.auto-compaction"
	OptDatalakeAutoExpireSnapshot = "table.datalake.auto-expire-snapshot"
	OptDatalakeEnabled            = "table.datalake.enabled"
	OptDatalakeFormat             = "table.datalake.format"
	OptDatalakeFreshness          = "table.datalake.freshness"
	OptDeleteBehavior             = "table.delete.behavior"
	OptKvFormat                   = "table.kv.format"
	OptKvFormatVersion            = "table.kv.format-version"
	OptLogArrowCompressionType    = "table.log.arrow.compression.type"
	OptLogArrowZstdLevel          = "table.log.arrow.compression.zstd.level"
	OptLogFormat                  = "table.log.format"
	OptLogTieredLocalSegments     = "table.log.tiered.local-segments"
	OptLogTTL                     = "table.log.ttl"
	OptMergeEngine                = "table.merge-engine"
	OptMergeEngineVersionColumn   = "table.merge-engine.versioned.ver-column"
	OptReplicationFactor          = "table.replication.factor"
	OptStatisticsColumns          = "table.statistics.columns"
	// OptUncleanLeaderElection is Strom's, after Kafka's topic config
	// unclean.leader.election.enable (Fluss has none).
	OptUncleanLeaderElection = "table.unclean-leader-election.enabled"
)

// CurrentKvFormatVersion is the highest table.kv.format-version accepted.
const CurrentKvFormatVersion = 2

// tableOptions is every table.* option, sorted by key. The keys, types,
// defaults and enum values are Fluss's (ConfigOptions.java); the bounds marked
// "Strom" in DESIGN.md are Strom's own.
var tableOptions = []OptionDef{
	{Key: OptAutoIncrementCacheSize, Type: OptionLong, Default: "100000", HasDefault: true,
		Min: 1, Max: math.MaxInt64, Bounded: true, PrimaryKeyOnly: false,
		Description: "How many auto-increment ids a tablet server fetches from the shared counter at a time."},
	{Key: OptAutoPartitionEnabled, Type: OptionBoolean, Default: "false", HasDefault: true,
		Description: "Create and drop partitions automatically by time; needs a partitioned table."},
	{Key: OptAutoPartitionKey, Type: OptionString,
		Description: "The partition key that carries time for auto-partitioning; required when there are several partition keys."},
	{Key: OptAutoPartitionNumPrecreate, Type: OptionInteger, Default: "2", HasDefault: true,
		Min: 0, Max: math.MaxInt32, Bounded: true,
		Description: "How many future partitions each auto-partition check creates ahead; must be 0 with several partition keys."},
	{Key: OptAutoPartitionNumRetention, Type: OptionInteger, Default: "7", HasDefault: true,
		Min: 0, Max: math.MaxInt32, Bounded: true,
		Description: "How many past auto-created partitions are kept; older ones are dropped."},
	{Key: OptAutoPartitionTimeUnit, Type: OptionEnum, Default: "DAY", HasDefault: true,
		Values:      []string{"YEAR", "QUARTER", "MONTH", "DAY", "HOUR"},
		Description: "The time span of one auto-created partition (names yyyy, yyyyQ, yyyyMM, yyyyMMdd, yyyyMMddHH)."},
	{Key: OptAutoPartitionTimeZone, Type: OptionString,
		Description: "The time zone auto-partitioning computes partition names in; the server's time zone when unset."},
	{Key: OptChangelogImage, Type: OptionEnum, Default: "FULL", HasDefault: true,
		Values:      []string{"FULL", "WAL"},
		Description: "Primary-key tables: FULL emits -U and +U for an update; WAL emits only +U (and may emit inserts as +U)."},
	{Key: OptDatalakeAutoCompaction, Type: OptionBoolean, Default: "false", HasDefault: true,
		Description: "Compact lake files when tiering writes to the lake."},
	{Key: OptDatalakeAutoExpireSnapshot, Type: OptionBoolean, Default: "false", HasDefault: true,
		Description: "Expire old lake snapshots when tiering commits to the lake."},
	{Key: OptDatalakeEnabled, Type: OptionBoolean, Default: "false", HasDefault: true,
		Description: "Tier the table into the lake."},
	{Key: OptDatalakeFormat, Type: OptionEnum,
		Values:      []string{"paimon", "lance", "iceberg"},
		Description: "The lake format of the table; the cluster's datalake.format when unset."},
	{Key: OptDatalakeFreshness, Type: OptionDuration, Default: "3 min", HasDefault: true,
		Description: "How far the lake copy may lag behind the table."},
	{Key: OptDeleteBehavior, Type: OptionEnum, Default: "ALLOW", HasDefault: true,
		Values: []string{"ALLOW", "IGNORE", "DISABLE"}, PrimaryKeyOnly: true,
		Description: "Primary-key tables: ALLOW deletes, IGNORE drops them silently, DISABLE rejects them. " +
			"With the first_row, versioned or aggregation merge engine the default is IGNORE."},
	{Key: OptKvFormat, Type: OptionEnum, Default: "COMPACTED", HasDefault: true,
		Values:      []string{"COMPACTED", "INDEXED"},
		Description: "The row format of the key-value store."},
	{Key: OptKvFormatVersion, Type: OptionInteger,
		Min: 1, Max: CurrentKvFormatVersion, Bounded: true,
		Description: "The key encoding version; set by the coordinator at creation when not given."},
	{Key: OptLogArrowCompressionType, Type: OptionEnum, Default: "ZSTD", HasDefault: true,
		Values:      []string{"NONE", "LZ4_FRAME", "ZSTD"},
		Description: "The compression of Arrow log batches."},
	{Key: OptLogArrowZstdLevel, Type: OptionInteger, Default: "3", HasDefault: true,
		Min: 1, Max: 22, Bounded: true,
		Description: "The ZSTD level of Arrow log batches, 1 to 22."},
	{Key: OptLogFormat, Type: OptionEnum, Default: "ARROW", HasDefault: true,
		Values:      []string{"ARROW", "INDEXED", "COMPACTED"},
		Description: "The record format of the log."},
	{Key: OptLogTieredLocalSegments, Type: OptionInteger, Default: "2", HasDefault: true,
		Min: 1, Max: math.MaxInt32, Bounded: true,
		Description: "How many log segments stay on local disk once remote tiering has copied them; at least 1."},
	{Key: OptLogTTL, Type: OptionDuration, Default: "7 d", HasDefault: true,
		Description: "How long log segments are kept before they may be deleted."},
	{Key: OptMergeEngine, Type: OptionEnum,
		Values: []string{"FIRST_ROW", "VERSIONED", "AGGREGATION"}, PrimaryKeyOnly: true,
		Description: "Primary-key tables: how a write merges with the stored row; last write wins when unset."},
	{Key: OptMergeEngineVersionColumn, Type: OptionString, PrimaryKeyOnly: true,
		Description: "The version column of the versioned merge engine (INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ)."},
	{Key: OptReplicationFactor, Type: OptionInteger,
		Min: 1, Max: math.MaxInt32, Bounded: true,
		Description: "How many replicas each bucket has; the cluster's default.replication.factor when unset."},
	{Key: OptStatisticsColumns, Type: OptionString,
		Description: "Columns whose min, max and null count log batches record: '*' or a comma-separated list; none when unset."},
	{Key: OptUncleanLeaderElection, Type: OptionBoolean, Default: "false", HasDefault: true,
		Description: "When no in-sync replica of a bucket is alive, elect a live replica outside the ISR (it may lack acknowledged writes: data loss) rather than keep the bucket offline until an in-sync replica returns."},
}

var optionIndex = func() map[string]int {
	m := make(map[string]int, len(tableOptions))
	for i, o := range tableOptions {
		m[o.Key] = i
	}
	return m
}()

// TableOptions returns every table option Strom knows (Fluss's table.*
// options), sorted by key. The slice is a copy.
func TableOptions() []OptionDef {
	out := slices.Clone(tableOptions)
	for i := range out {
		out[i].Values = slices.Clone(out[i].Values)
	}
	return out
}

// LookupOption returns the definition of a table option.
func LookupOption(key string) (OptionDef, bool) {
	i, ok := optionIndex[key]
	if !ok {
		return OptionDef{}, false
	}
	o := tableOptions[i]
	o.Values = slices.Clone(o.Values)
	return o, true
}

// OptionDefault returns Fluss's default value of a table option; false when
// the key is not a table option or the option has no default.
func OptionDefault(key string) (string, bool) {
	i, ok := optionIndex[key]
	if !ok || !tableOptions[i].HasDefault {
		return "", false
	}
	return tableOptions[i].Default, true
}

// checkValue returns why v is not a valid value of o, or "".
func (o OptionDef) checkValue(v string) string {
	switch o.Type {
	case OptionBoolean:
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return fmt.Sprintf("%q is not a boolean; use true or false", v)
		}
	case OptionInteger, OptionLong:
		bits := 32
		if o.Type == OptionLong {
			bits = 64
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return fmt.Sprintf("%q is not a %d-bit integer", v, bits)
		}
		if o.Bounded && (n < o.Min || n > o.Max) {
			if o.Max == math.MaxInt32 || o.Max == math.MaxInt64 {
				return fmt.Sprintf("%d is too small; it must be at least %d", n, o.Min)
			}
			return fmt.Sprintf("%d is out of range; it must be between %d and %d", n, o.Min, o.Max)
		}
	case OptionDuration:
		if _, err := ParseDuration(v); err != nil {
			return err.Error()
		}
	case OptionMemorySize:
		if _, err := ParseMemorySize(v); err != nil {
			return err.Error()
		}
	case OptionEnum:
		if o.enumValue(v) == "" {
			return fmt.Sprintf("%q is not one of %s (case-insensitive)", v, strings.Join(o.Values, ", "))
		}
	case OptionString:
		if o.Key == OptAutoPartitionTimeZone {
			return timeZoneProblem(v)
		}
	}
	return ""
}

// enumValue returns the canonical spelling of an Enum value, or "".
func (o OptionDef) enumValue(v string) string {
	for _, allowed := range o.Values {
		if strings.EqualFold(allowed, v) {
			return allowed
		}
	}
	return ""
}

// timeZoneProblem checks the syntax of a Java ZoneId: "Z", an offset
// ("+08:00"), UTC/GMT/UT with an optional offset, or a region id
// ("Asia/Shanghai"). Whether a region exists is not checked here: that needs
// a time-zone database, which the server has and a client may not.
func timeZoneProblem(v string) string {
	bad := fmt.Sprintf("%q is not a time zone; use a region like Europe/Berlin, UTC, or an offset like +08:00", v)
	switch {
	case v == "Z", v == "UTC", v == "GMT", v == "UT":
		return ""
	case strings.HasPrefix(v, "UTC+"), strings.HasPrefix(v, "UTC-"),
		strings.HasPrefix(v, "GMT+"), strings.HasPrefix(v, "GMT-"):
		if offsetOK(v[3:]) {
			return ""
		}
		return bad
	case strings.HasPrefix(v, "UT+"), strings.HasPrefix(v, "UT-"):
		if offsetOK(v[2:]) {
			return ""
		}
		return bad
	case strings.HasPrefix(v, "+"), strings.HasPrefix(v, "-"):
		if offsetOK(v) {
			return ""
		}
		return bad
	}
	// Region id: [A-Za-z][A-Za-z0-9~/._+-]+, as ZoneRegion accepts.
	if len(v) < 2 || !isASCIILetter(v[0]) {
		return bad
	}
	for i := 1; i < len(v); i++ {
		c := v[i]
		if !isASCIILetter(c) && !(c >= '0' && c <= '9') && !strings.ContainsRune("~/._+-", rune(c)) {
			return bad
		}
	}
	return ""
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// offsetOK accepts ZoneOffset forms: +h, +hh, +hh:mm, +hhmm, +hh:mm:ss,
// +hhmmss, within ±18:00.
func offsetOK(s string) bool {
	if len(s) < 2 || s[0] != '+' && s[0] != '-' {
		return false
	}
	body := s[1:]
	digits := strings.ReplaceAll(body, ":", "")
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	var h, m, sec string
	switch {
	case len(body) == 1 || len(body) == 2:
		h = body
	case len(body) == 5 && body[2] == ':':
		h, m = body[:2], body[3:]
	case len(body) == 4 && !strings.Contains(body, ":"):
		h, m = body[:2], body[2:]
	case len(body) == 8 && body[2] == ':' && body[5] == ':':
		h, m, sec = body[:2], body[3:5], body[6:]
	case len(body) == 6 && !strings.Contains(body, ":"):
		h, m, sec = body[:2], body[2:4], body[4:]
	default:
		return false
	}
	hh, _ := strconv.Atoi(h)
	mm, _ := strconv.Atoi(m)
	ss, _ := strconv.Atoi(sec)
	if mm > 59 || ss > 59 {
		return false
	}
	return hh*3600+mm*60+ss <= 18*3600
}

// durationUnits are the unit labels of Fluss's TimeUtils.parseDuration
// (Flink's), with what they stand for. A label with a plural form accepts it
// with a trailing "s" too.
var durationUnits = []struct {
	labels []string
	unit   time.Duration
}{
	{[]string{"d", "day", "days"}, 24 * time.Hour},
	{[]string{"h", "hour", "hours"}, time.Hour},
	{[]string{"min", "m", "minute", "minutes"}, time.Minute},
	{[]string{"s", "sec", "secs", "second", "seconds"}, time.Second},
	{[]string{"ms", "milli", "millis", "millisecond", "milliseconds"}, time.Millisecond},
	{[]string{"µs", "micro", "micros", "microsecond", "microseconds"}, time.Microsecond},
	{[]string{"ns", "nano", "nanos", "nanosecond", "nanoseconds"}, time.Nanosecond},
}

// ParseDuration parses a duration as Fluss's configuration does: a
// non-negative integer, optional white space, and an optional unit ("7 d",
// "168h", "7days", "3 min", "500ms"; no unit means milliseconds). Units are
// case-insensitive: d/day(s), h/hour(s), min/m/minute(s), s/sec(s)/second(s),
// ms/milli(s)/millisecond(s), µs/micro(s)/microsecond(s),
// ns/nano(s)/nanosecond(s). Unlike Java's Duration, the result must fit in a
// time.Duration (about 292 years).
func ParseDuration(s string) (time.Duration, error) {
	num, label, err := splitNumber(s, "duration")
	if err != nil {
		return 0, err
	}
	unit := time.Millisecond
	if label != "" {
		unit = 0
		for _, u := range durationUnits {
			if slices.Contains(u.labels, label) {
				unit = u.unit
			}
		}
		if unit == 0 {
			return 0, fmt.Errorf("%q has unknown time unit %q; use one of d, h, min, s, ms, µs, ns (or day(s), hour(s), minute(s), ...)", s, label)
		}
	}
	n, err := strconv.ParseUint(num, 10, 63)
	if err != nil || n > uint64(math.MaxInt64/int64(unit)) {
		return 0, fmt.Errorf("%q is too long a duration", s)
	}
	return time.Duration(n) * unit, nil
}

// memoryUnits are the unit labels of Fluss's MemorySize.parse.
var memoryUnits = []struct {
	labels []string
	shift  uint
}{
	{[]string{"b", "bytes"}, 0},
	{[]string{"k", "kb", "kibibytes"}, 10},
	{[]string{"m", "mb", "mebibytes"}, 20},
	{[]string{"g", "gb", "gibibytes"}, 30},
	{[]string{"t", "tb", "tebibytes"}, 40},
}

// ParseMemorySize parses a size in bytes as Fluss's configuration does: a
// non-negative integer, optional white space, and an optional unit ("256mb",
// "4 kb", "1g"; no unit means bytes). Units are case-insensitive and powers of
// 1024: b/bytes, k/kb/kibibytes, m/mb/mebibytes, g/gb/gibibytes,
// t/tb/tebibytes.
func ParseMemorySize(s string) (int64, error) {
	num, label, err := splitNumber(s, "memory size")
	if err != nil {
		return 0, err
	}
	shift, found := uint(0), label == ""
	for _, u := range memoryUnits {
		if slices.Contains(u.labels, label) {
			shift, found = u.shift, true
		}
	}
	if !found {
		return 0, fmt.Errorf("%q has unknown memory unit %q; use one of b, kb, mb, gb, tb", s, label)
	}
	n, err := strconv.ParseUint(num, 10, 63)
	if err != nil || n > uint64(math.MaxInt64)>>shift {
		return 0, fmt.Errorf("%q is too large a memory size; it must fit in 64 bits of bytes", s)
	}
	return int64(n << shift), nil
}

// splitNumber splits "  12 unit " into "12" and "unit" (lower-cased).
func splitNumber(s, what string) (num, label string, err error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return "", "", fmt.Errorf("%s is empty; write a number and a unit, like \"7 d\" or \"256mb\"", what)
	}
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return "", "", fmt.Errorf("%q is not a %s: it must start with a non-negative whole number, like \"7 d\" or \"256mb\"", s, what)
	}
	return t[:i], strings.ToLower(strings.TrimSpace(t[i:])), nil
}

// suggestOption returns the known option key closest to key, or "" when
// none is close enough to be a likely typo.
func suggestOption(key string) string {
	best, bestDist := "", 0
	for _, o := range tableOptions {
		d := editDistance(key, o.Key)
		// One key extending the other ("table.log.format.type",
		// "table.log.arrow.compression") is close however long the rest.
		related := strings.HasPrefix(key, o.Key+".") || strings.HasPrefix(o.Key, key+".")
		if !related && d > max(3, len(key)/5) {
			continue
		}
		if best == "" || d < bestDist {
			best, bestDist = o.Key, d
		}
	}
	if best != "" {
		return best
	}
	// A key that names a known option's last part ("table.ttl" for
	// "table.log.ttl") is close in meaning if not in spelling.
	tail := key[strings.LastIndexByte(key, '.')+1:]
	for _, o := range tableOptions {
		if tail != "" && strings.HasSuffix(o.Key, "."+tail) {
			return o.Key
		}
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
