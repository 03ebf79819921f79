package check

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/anishathalye/porcupine"

	"strom/internal/robustness/history"
)

// never is the return time of an operation whose outcome is unknown:
// porcupine may linearize it at any point after its invocation, including
// after every other operation (which is the same as never applied).
const never = math.MaxInt64

// partition is one independently checked part of a history (one key, one
// table); its operations carry their history index as Metadata.
type partition struct {
	name string
	ops  []porcupine.Operation
}

// operation converts a history operation to porcupine's, with the
// operation's index as metadata and an unknown outcome never returning.
func operation(i int, op history.Op, input, output any) porcupine.Operation {
	ret := op.Return
	if op.Outcome == history.Unknown {
		ret = never
	}
	return porcupine.Operation{ClientId: op.Client, Input: input, Call: op.Invoke, Output: output, Return: ret, Metadata: i}
}

// describeIndex shows an operation's history index in a visualisation.
func describeIndex(m any) string { return fmt.Sprintf("op %d", m) }

// checkLinearizable checks each partition with model, in order: a
// partition above opts.MaxOpsPerPartition is refused, one undecided within
// opts.Timeout leaves the result undecided (both in r.Error), and one with
// no linearization is an anomaly naming its operations, with porcupine's
// visualisation written to opts.Dir as <r.Checker>-N.html.
func checkLinearizable(r *Result, model porcupine.Model, parts []partition, opts Options) {
	var errs []string
	shown := 0
	for _, p := range parts {
		r.Ops += len(p.ops)
		if len(p.ops) > opts.MaxOpsPerPartition {
			errs = append(errs, fmt.Sprintf("%s has %d operations, above the limit of %d (raise Options.MaxOpsPerPartition, or spread the workload over more keys)",
				p.name, len(p.ops), opts.MaxOpsPerPartition))
			continue
		}
		switch porcupine.CheckOperationsTimeout(model, p.ops, opts.Timeout) {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			errs = append(errs, fmt.Sprintf("%s undecided after %v (raise Options.Timeout)", p.name, opts.Timeout))
			continue
		}
		ops := make([]int, len(p.ops))
		for k, o := range p.ops {
			ops[k] = o.Metadata.(int)
		}
		detail := fmt.Sprintf("%s: no linearization explains these %d operations", p.name, len(p.ops))
		if opts.Dir != "" && shown < opts.MaxVisualizations {
			shown++
			path := filepath.Join(opts.Dir, fmt.Sprintf("%s-%d.html", r.Checker, shown))
			_, info := porcupine.CheckOperationsVerbose(model, p.ops, opts.Timeout)
			if err := porcupine.VisualizePath(model, info, path); err != nil {
				errs = append(errs, fmt.Sprintf("%s: write the visualisation: %v", p.name, err))
			} else {
				detail += "; see " + path
			}
		}
		r.add(opts.MaxAnomalies, Anomaly{Kind: AnomalyNonLinearizable, Ops: ops, Detail: detail})
	}
	r.Error = strings.Join(errs, "; ")
}
