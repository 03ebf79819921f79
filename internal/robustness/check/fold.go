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
func CheckFold(name string, contents map[string]string, changelog []Change) Result {
	r := &Result{Checker: "fold", Ops: len(changelog)}
	fold := map[string][]byte{}
	for i, c := range changelog {
		switch c.Type {
		case record.Insert, record.UpdateAfter:
			fold[c.Key] = []byte(c.Value)
		case record.Delete:
			delete(fold, c.Key)
		case record.UpdateBefore:
		default:
			r.add(1, Anomaly{Kind: AnomalyFold, Detail: fmt.Sprintf("%s: changelog row %d has change type %s, not one of a primary-key table", name, i, c.Type)})
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
		r.add(1, Anomaly{Kind: AnomalyFold, Detail: fmt.Sprintf("%s: %v", name, err)})
	}
	return r.finish()
}
