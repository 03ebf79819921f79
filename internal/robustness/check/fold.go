package check

import (
	"fmt"
	"maps"
	"slices"

	"strom/record"
	"strom/tablet/kv"
)

// Change is one row of a primary-key bucket's changelog, as a log scan of
// the table returns it. Key and Value are the caller's encoding of the
// row's primary key and of the whole row, the same encoding as the
// contents given to CheckFold.
type Change struct {
	Type       record.ChangeType
	Key, Value string
}

// CheckFold checks DESIGN.md §8.4 from outside a node: contents, a
// primary-key bucket's rows (key to row, read through the API after the
// run), equal the fold of changelog, its changelog from offset 0 in
// offset order (+I and +U set the key's row, -D removes the key, -U is the
// old image and changes nothing). The first difference is an anomaly
// naming the key; name says which bucket and replica, for the report. The
// comparison is tablet/kv's DiffFold, the one VerifyFold uses in process.
//
// It also checks the changelog against itself, as a consumer retracting
// rows relies on it: a +I is for an absent key, and the image a -U or -D
// carries is the key's row at that point. The first row breaking that is
// one more anomaly (changelog_inconsistent).
func CheckFold(name string, contents map[string]string, changelog []Change) Result {
	r := &Result{Checker: "fold", Ops: len(changelog)}
	fold := map[string][]byte{}
	reported := false // the first inconsistent row only
	inconsistent := func(i int, c Change, format string, args ...any) {
		if !reported {
			reported = true
			r.add(2, Anomaly{Kind: AnomalyChangelog, Detail: fmt.Sprintf("%s: changelog row %d (%s key %q): %s", name, i, c.Type, c.Key, fmt.Sprintf(format, args...))})
		}
	}
	for i, c := range changelog {
		cur, has := fold[c.Key]
		switch c.Type {
		case record.Insert:
			if has {
				inconsistent(i, c, "inserts a key that holds %q", cur)
			}
			fold[c.Key] = []byte(c.Value)
		case record.UpdateAfter:
			fold[c.Key] = []byte(c.Value)
		case record.UpdateBefore, record.Delete:
			if !has || string(cur) != c.Value {
				inconsistent(i, c, "has the old image %q, the key holds %s", c.Value, image(cur, has))
			}
			if c.Type == record.Delete {
				delete(fold, c.Key)
			}
		default:
			r.add(2, Anomaly{Kind: AnomalyFold, Detail: fmt.Sprintf("%s: changelog row %d has change type %s, not one of a primary-key table", name, i, c.Type)})
			return r.finish()
		}
	}
	err := kv.DiffFold(fold, func(yield func(k, v []byte) bool) {
		for _, k := range slices.Sorted(maps.Keys(contents)) {
			if !yield([]byte(k), []byte(contents[k])) {
				return
			}
		}
	})
	if err != nil {
		r.add(2, Anomaly{Kind: AnomalyFold, Detail: fmt.Sprintf("%s: %v", name, err)})
	}
	return r.finish()
}

// image shows a key's row, or that it is absent.
func image(row []byte, has bool) string {
	if !has {
		return "nothing"
	}
	return fmt.Sprintf("%q", row)
}
