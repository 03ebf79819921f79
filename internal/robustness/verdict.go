package robustness

import "strom/internal/robustness/history"

// checkHistory runs the checkers on h and returns what was checked and the
// anomalies found.
func checkHistory(h *history.History) (checks, anomalies []string) {
	return []string{"none: internal/robustness/check has not landed"}, nil
}
