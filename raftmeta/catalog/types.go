package catalog

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// The JSON shapes below follow Fluss's *JsonSerde classes field for field, so
// a tool that reads Fluss's znodes reads ours.

// DatabaseRegistration is stored at /metadata/databases/<db>.
type DatabaseRegistration struct {
	Version          int               `json:"version"`
	Comment          string            `json:"comment,omitempty"`
	CustomProperties map[string]string `json:"custom_properties"`
	CreatedTime      int64             `json:"created_time"`
	ModifiedTime     int64             `json:"modified_time"`
}

// TableRegistration is stored at /metadata/databases/<db>/tables/<table>.
// The schema lives beside it, under schemas/<id>.
type TableRegistration struct {
	Version          int               `json:"version"`
	TableID          int64             `json:"table_id"`
	Comment          string            `json:"comment,omitempty"`
	PartitionKeys    []string          `json:"partition_key,omitempty"`
	BucketKeys       []string          `json:"bucket_key,omitempty"`
	BucketCount      int32             `json:"bucket_count"`
	Properties       map[string]string `json:"properties"`
	CustomProperties map[string]string `json:"custom_properties"`
	RemoteDataDir    string            `json:"remote_data_dir"`
	CreatedTime      int64             `json:"created_time"`
	ModifiedTime     int64             `json:"modified_time"`
}

// TableAssignment is stored at /tabletservers/tables/<tableId>: for each
// bucket, the node ids of its replicas, the preferred leader first.
type TableAssignment struct {
	Buckets map[int32][]int32
}

type tableAssignmentJSON struct {
	Version int                `json:"version"`
	Buckets map[string][]int32 `json:"buckets"`
}

// MarshalJSON writes Fluss's shape: {"version":1,"buckets":{"0":[1,2]}}.
func (a TableAssignment) MarshalJSON() ([]byte, error) {
	out := tableAssignmentJSON{Version: 1, Buckets: make(map[string][]int32, len(a.Buckets))}
	for b, replicas := range a.Buckets {
		out.Buckets[itoa(b)] = replicas
	}
	return json.Marshal(out) // encoding/json sorts map keys: the bytes are deterministic
}

// UnmarshalJSON reads Fluss's shape.
func (a *TableAssignment) UnmarshalJSON(data []byte) error {
	var in tableAssignmentJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	a.Buckets = make(map[int32][]int32, len(in.Buckets))
	for k, replicas := range in.Buckets {
		b, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			return fmt.Errorf("bucket id %q: %w", k, err)
		}
		a.Buckets[int32(b)] = replicas
	}
	return nil
}

// BucketIDs returns the assignment's buckets in increasing order.
func (a TableAssignment) BucketIDs() []int32 {
	ids := make([]int32, 0, len(a.Buckets))
	for b := range a.Buckets {
		ids = append(ids, b)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// LeaderAndISR is stored at /tabletservers/tables/<tableId>/buckets/<b>/leader_isr.
type LeaderAndISR struct {
	Version          int     `json:"version"`
	Leader           int32   `json:"leader"`
	LeaderEpoch      int32   `json:"leader_epoch"`
	ISR              []int32 `json:"isr"`
	CoordinatorEpoch int32   `json:"coordinator_epoch"`
	BucketEpoch      int32   `json:"bucket_epoch"`
	StandbyReplicas  []int32 `json:"hot_standby_replicas"`
	ISSR             []int32 `json:"issr"`
	// ELR are the eligible leader replicas (Kafka's KIP-966; Strom's, not
	// Fluss's): replicas that left the ISR while it was smaller than
	// min-in-sync, so that no acks=-1 write was acknowledged without
	// them, and that the coordinator may elect when no ISR member is live
	// (server/coordinator/DESIGN.md, "Leader election"). Empty whenever
	// the ISR has min-in-sync members.
	ELR []int32 `json:"elr,omitempty"`
}

// CoordinatorAddress is stored at /coordinators/active.
type CoordinatorAddress struct {
	Version   int    `json:"version"`
	ID        string `json:"id"`
	Listeners string `json:"listeners"`
}

// TabletServerRegistration is stored at /tabletservers/ids/<id>, an ephemeral
// znode owned by the node's metadata session.
type TabletServerRegistration struct {
	Version           int    `json:"version"`
	Listeners         string `json:"listeners"`
	RegisterTimestamp int64  `json:"register_timestamp"`
	Rack              string `json:"rack,omitempty"`
	// FeatureLevel is the highest feature level the node's build speaks
	// (SupportedFeatureLevel); absent in the registrations of builds that
	// predate feature levels, which speak FeatureLevelBase. Strom's own
	// field: Fluss has none.
	FeatureLevel int `json:"feature_level,omitempty"`
	// Incarnation identifies the node's run: a value chosen when the
	// process started (its start time in nanoseconds), the same in every
	// registration of that run. A leader counts a follower's fetch only
	// when it carries the incarnation of the follower's registration, so a
	// fetch sent before the node restarted does not (Kafka's broker epoch,
	// KIP-903). Absent (0) in registrations of builds without it. Strom's
	// own field.
	Incarnation int64 `json:"incarnation,omitempty"`
}

// ListenerName is the name of the API listener in the listeners strings.
const ListenerName = "CLIENT"

// Listeners formats an API address as Fluss's listeners string.
func Listeners(apiAddr string) string { return ListenerName + "://" + apiAddr }

func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Every type above marshals; failing here is a programming error.
		panic(fmt.Sprintf("catalog: marshal %T: %v", v, err))
	}
	return b
}
