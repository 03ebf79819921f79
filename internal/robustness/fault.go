package robustness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"strom/internal/robustness/history"
)

// injector runs a schedule's steps against a cluster.
type injector struct {
	c      *Cluster
	lg     *slog.Logger
	rec    *recorder
	seed   int64
	db     string   // the workloads' database
	tables []string // tables whose bucket 0's leader BucketLeader picks from
	// stopTimeout bounds a SIGTERM'd node's controlled shutdown.
	stopTimeout time.Duration
}

// resolve returns the node a step aims at: its role's node when one is
// known, else the step's pick among the nodes.
func (in *injector) resolve(ctx context.Context, st Step) int {
	id := 0
	switch st.Role {
	case RaftLeader:
		id = in.c.RaftLeader(ctx)
	case BucketLeader:
		id = in.c.BucketLeader(ctx, in.db, in.tables[st.Pick%uint64(len(in.tables))])
	}
	if id < 1 || id > len(in.c.nodes) {
		id = 1 + int(st.Pick%uint64(len(in.c.nodes)))
	}
	return id
}

// other returns a node other than id, chosen by pick.
func (in *injector) other(id int, pick uint64) int {
	o := 1 + int((pick/7)%uint64(len(in.c.nodes)-1))
	if o >= id {
		o++
	}
	return o
}

// run does step st: starts the fault, holds it, ends it, and writes it to
// the history. It returns when the fault has ended; when ctx ends first,
// the fault ends early (the run's final heal catches what is left). An
// error is a fault the harness could not apply or end (a node that does
// not come back is one): the run reports it.
func (in *injector) run(ctx context.Context, st Step) error {
	net := in.c.net
	f := history.Fault{Kind: string(st.Kind), Seed: in.seed, Start: in.rec.clock.Now()}
	if st.Role != "" {
		f.Detail = "role " + string(st.Role)
	}
	detail := func(s string) { f.Detail = joinDetail(f.Detail, s) }
	var err error
	var end func() error
	switch st.Kind {
	case Partition:
		id := in.resolve(ctx, st)
		f.Nodes = in.names(id)
		net.Isolate(in.c.Node(id).Name)
		end = func() error { net.Rejoin(in.c.Node(id).Name); return nil }
	case Split:
		minority, majority := in.split(st.Pick)
		f.Nodes = in.names(minority...)
		detail(fmt.Sprintf("minority %v, majority %v", in.names(minority...), in.names(majority...)))
		net.Partition(in.names(minority...), in.names(majority...))
		end = func() error { net.Heal(); return nil }
	case CutOneWay:
		from := in.resolve(ctx, st)
		to := in.other(from, st.Pick)
		f.Nodes = in.names(from, to)
		detail(fmt.Sprintf("n%d -> n%d cut", from, to))
		net.Cut(in.c.Node(from).Name, in.c.Node(to).Name)
		end = func() error { net.Heal(); return nil }
	case Latency:
		id := in.resolve(ctx, st)
		f.Nodes = in.names(id)
		detail(st.Delay.String() + " each way")
		name := in.c.Node(id).Name
		for _, o := range in.c.nodes {
			if o.ID != id {
				net.Delay(name, o.Name, st.Delay)
				net.Delay(o.Name, name, st.Delay)
			}
		}
		end = func() error { net.Rejoin(name); return nil }
	case DropConns:
		id := in.resolve(ctx, st)
		f.Nodes = in.names(id)
		end = in.dropLoop(in.c.Node(id).Name)
	case Kill:
		id := in.resolve(ctx, st)
		f.Nodes = in.names(id)
		n := in.c.Node(id)
		err = n.Kill()
		end = func() error { return n.Start(ctx) }
	case Pause:
		id := in.resolve(ctx, st)
		f.Nodes = in.names(id)
		n := in.c.Node(id)
		err = n.Pause()
		end = n.Resume
	case Restart:
		id := in.resolve(ctx, st)
		f.Nodes = in.names(id)
		in.lg.Info("fault starting", "kind", st.Kind, "nodes", f.Nodes, "detail", f.Detail)
		err = in.restart(ctx, id)
	case RollingRestart:
		in.lg.Info("fault starting", "kind", st.Kind)
		var errs []error
		for _, n := range in.c.nodes {
			f.Nodes = append(f.Nodes, n.Name)
			errs = append(errs, in.restart(ctx, n.ID))
		}
		err = errors.Join(errs...)
	default:
		return fmt.Errorf("robustness: unknown fault kind %q", st.Kind)
	}
	if end != nil {
		in.lg.Info("fault started", "kind", st.Kind, "nodes", f.Nodes, "detail", f.Detail)
	}
	if err == nil && end != nil {
		select {
		case <-time.After(st.Hold):
		case <-ctx.Done():
		}
		err = end()
	}
	f.End = in.rec.clock.Now()
	if err != nil {
		err = fmt.Errorf("robustness: fault %s on %v: %w", st.Kind, f.Nodes, err)
		detail("error: " + err.Error())
	}
	in.lg.Info("fault ended", "kind", st.Kind, "nodes", f.Nodes, "err", err)
	in.rec.fault(f)
	return err
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// names returns the proxy names of nodes ids.
func (in *injector) names(ids ...int) []string {
	var out []string
	for _, id := range ids {
		out = append(out, in.c.Node(id).Name)
	}
	return out
}

// split divides the nodes into a minority and a majority, by pick.
func (in *injector) split(pick uint64) (minority, majority []int) {
	n := len(in.c.nodes)
	order := make([]int, n)
	for i := range order {
		order[i] = i + 1
	}
	for i := n - 1; i > 0; i-- { // a shuffle drawn from pick
		j := int(pick % uint64(i+1))
		pick /= uint64(i + 1)
		order[i], order[j] = order[j], order[i]
	}
	return order[:(n-1)/2], order[(n-1)/2:]
}

// dropLoop closes every connection to and from node name now and every
// half second until the returned end is called.
func (in *injector) dropLoop(name string) (end func() error) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			for _, o := range in.c.nodes {
				if o.Name != name {
					in.c.net.Drop(name, o.Name)
					in.c.net.Drop(o.Name, name)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return func() error { close(stop); <-done; return nil }
}

// restart stops node id with SIGTERM and starts it again, ready.
func (in *injector) restart(ctx context.Context, id int) error {
	n := in.c.Node(id)
	err := n.Stop(in.stopTimeout)
	if serr := n.Start(ctx); serr != nil {
		err = errors.Join(err, serr)
	}
	return err
}

// healAll ends whatever is left of any fault: every link restored, every
// paused node resumed, every stopped node started again and ready.
func (in *injector) healAll(ctx context.Context) error {
	in.c.net.Heal()
	var errs []error
	for _, n := range in.c.nodes {
		switch {
		case n.Paused():
			errs = append(errs, n.Resume())
		case !n.Running():
			in.lg.Info("starting a node left down", "node", n.Name)
			errs = append(errs, n.Start(ctx))
		}
	}
	return errors.Join(errs...)
}
