package coordinator

import (
	"slices"

	"strom/raftmeta/catalog"
)

// place assigns replication replicas to each of buckets buckets over the
// live servers, as Kafka's and Fluss's replica assignment does
// (TableAssignmentUtils.generateRackAwareAssigment): servers are ordered
// alternating between racks; bucket b's first replica, its preferred
// leader, is server (start+b) mod n, so each server leads buckets/n of
// them; each further replica is taken at a shift from the first that grows
// by one every n buckets, skipping servers on a rack (and servers) the
// bucket already has while others remain. Servers without a rack form one
// rack, so with no racks set this is the rack-unaware assignment.
//
// Kafka and Fluss pick start and the first shift at random; here both are
// the table id (mod n), so placement is reproducible and consecutive
// tables start on consecutive servers, which balances leaders across tables
// too. The caller ensures 1 ≤ replication ≤ len(servers).
func place(tableID int64, buckets, replication int, servers []catalog.TabletServer) catalog.TableAssignment {
	order, racks := rackAlternated(servers)
	n := len(order)
	start := int(tableID % int64(n))
	shift := start
	a := catalog.TableAssignment{Buckets: make(map[int32][]int32, buckets)}
	for b := range buckets {
		if b > 0 && b%n == 0 {
			shift++
		}
		first := (b + start) % n
		replicas := []int32{order[first].ID}
		usedRacks := map[string]bool{order[first].Registration.Rack: true}
		for k := 0; len(replicas) < replication; k++ {
			s := order[replicaIndex(first, shift*racks, k, n)]
			rackFree := !usedRacks[s.Registration.Rack] || len(usedRacks) == racks
			if rackFree && !slices.Contains(replicas, s.ID) {
				replicas = append(replicas, s.ID)
				usedRacks[s.Registration.Rack] = true
			}
		}
		a.Buckets[int32(b)] = replicas
	}
	return a
}

// replicaIndex is Kafka's: the k-th candidate after first, at a shift in
// [1, n-1] so it is never first itself.
func replicaIndex(first, shift, k, n int) int {
	if n == 1 {
		return first
	}
	return (first + 1 + (shift+k)%(n-1)) % n
}

// rackAlternated orders servers rack by rack in turn (racks by name, servers
// by id within a rack: r1's first, r2's first, …, r1's second, …), as
// Kafka's getRackAlternatedBrokerList, and returns the number of racks.
func rackAlternated(servers []catalog.TabletServer) ([]catalog.TabletServer, int) {
	byRack := map[string][]catalog.TabletServer{}
	for _, s := range servers {
		byRack[s.Registration.Rack] = append(byRack[s.Registration.Rack], s)
	}
	names := make([]string, 0, len(byRack))
	for r, ss := range byRack {
		names = append(names, r)
		slices.SortFunc(ss, func(a, b catalog.TabletServer) int { return int(a.ID - b.ID) })
	}
	slices.Sort(names)
	out := make([]catalog.TabletServer, 0, len(servers))
	for i := 0; len(out) < len(servers); i++ {
		for _, r := range names {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out, len(names)
}
