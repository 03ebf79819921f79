package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"strom/client"
	"strom/internal/testcluster"
	"strom/raftmeta/catalog"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// chromium returns the path of a Chromium (Debian's package), skipping the
// test when there is none, or failing it under CI=true, where
// scripts/chromium.sh has installed it.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const fix = "no chromium on PATH: install it with scripts/chromium.sh (apt-get install -y chromium chromium-driver)"
	if os.Getenv("CI") == "true" {
		t.Fatal(fix)
	}
	t.Skip(fix)
	return ""
}

// screenshots is where the test writes its PNGs: STROM_UI_SCREENSHOTS, or
// strom-ui-screenshots in the temporary directory.
func screenshots(t *testing.T) string {
	dir := os.Getenv("STROM_UI_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "strom-ui-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// browser drives one headless Chromium tab and polls the page.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string
}

// do runs a JavaScript statement in the page.
func (b *browser) do(js string) error {
	_, err := chromedp.Run(b.ctx, chromedp.Evaluate[any](js))
	return err
}

// waitFor evaluates expr into *res until ok accepts it, failing the test
// with what it saw last when the test's context ends. Conditions are
// polled, never slept on.
func waitFor[T any](b *browser, what, expr string, res *T, ok func() bool) {
	b.t.Helper()
	var last error
	for {
		var v T
		if v, last = chromedp.Run(b.ctx, chromedp.Evaluate[T](expr)); last == nil {
			*res = v
			if ok() {
				return
			}
		}
		select {
		case <-b.ctx.Done():
			b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
			b.t.Fatalf("the page never showed %s: last value %v, error %v", what, *res, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// show sets the location hash, which switches the console's view.
func (b *browser) show(hash string) {
	b.t.Helper()
	if err := b.do(fmt.Sprintf("location.hash = %q", hash)); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) shot(name string) {
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Error(err)
	}
}

// rowsOf is a JavaScript expression: the cells' text of the rows of the
// table body matching sel.
func rowsOf(sel string) string {
	return fmt.Sprintf(`[...document.querySelectorAll(%q)].map(tr => [...tr.cells].map(c => c.textContent))`, sel+" tbody tr")
}

// TestConsole drives the web console in headless Chromium against three
// nodes: a log table of three buckets and a primary-key table of two,
// replicated on all three, written through the Go client. Each page is
// checked against what the API says: the cluster's nodes and Raft leader,
// the tables, each bucket's leader and high watermark, a tail that shows
// rows as they are written and only the columns chosen, lookups (through
// a node that leads none of the table's buckets, so the console follows
// the leader its error names), and the node's /metrics counters. Each page
// is saved as a PNG.
func TestConsole(t *testing.T) {
	exe := chromium(t)
	dir := screenshots(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	c := testcluster.New(t, testcluster.Options{Nodes: 3})
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	cl := c.Client(client.WithRetryTimeout(30 * time.Second))
	admin := cl.Admin()
	if _, err := admin.CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "shop", IgnoreIfExists: true}); err != nil {
		t.Fatal(err)
	}
	rf3 := map[string]string{"table.replication.factor": "3"}
	for _, req := range []*stromv1.CreateTableRequest{
		{Database: "shop", Table: "clicks", IgnoreIfExists: true, Descriptor_: &stromv1.TableDescriptor{
			Schema: &stromv1.Schema{Columns: []*stromv1.Column{
				{Name: "user_id", Type: "BIGINT NOT NULL"}, {Name: "url", Type: "STRING"},
			}},
			BucketCount: 3, Properties: rf3,
		}},
		{Database: "shop", Table: "customers", IgnoreIfExists: true, Descriptor_: &stromv1.TableDescriptor{
			Schema: &stromv1.Schema{Columns: []*stromv1.Column{
				{Name: "id", Type: "INT"}, {Name: "name", Type: "STRING"},
			}, PrimaryKey: []string{"id"}},
			BucketCount: 2, Properties: rf3,
		}},
	} {
		if _, err := admin.CreateTable(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	clicks, err := cl.Table(ctx, "shop", "clicks")
	if err != nil {
		t.Fatal(err)
	}
	aw, err := clicks.NewAppendWriter(ctx, client.Acks(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer aw.Close(context.Background())
	// appendClicks writes users from..to-1 (url /page/<user>) and waits
	// for every acknowledgement.
	appendClicks := func(from, to int64) {
		t.Helper()
		var fs []*client.Future
		for u := from; u < to; u++ {
			fs = append(fs, aw.Append(ctx, record.Row{u, "/page/" + strconv.FormatInt(u, 10)}))
		}
		if err := aw.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if _, _, err := f.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendClicks(0, 30)
	customers, err := cl.Table(ctx, "shop", "customers")
	if err != nil {
		t.Fatal(err)
	}
	uw, err := customers.NewUpsertWriter(ctx, client.Acks(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer uw.Close(context.Background())
	for id := int32(1); id <= 6; id++ {
		uw.Upsert(ctx, record.Row{id, fmt.Sprintf("Customer#%d", id)})
	}
	if err := uw.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// The console's node leads no bucket of customers, so its lookups
	// are answered NOT_LEADER_OR_FOLLOWER first.
	custInfo, err := admin.GetTable(ctx, "shop", "customers")
	if err != nil {
		t.Fatal(err)
	}
	console := c.Node(1)
	for _, n := range c.Nodes() {
		if !slices.ContainsFunc(custInfo.Buckets, func(b *stromv1.BucketAssignment) bool { return b.Leader == n.ID }) {
			console = n
			break
		}
	}
	base := "http://" + console.API + "/ui/"
	t.Logf("console on node %d: %s", console.ID, base)

	// /ui redirects to the console's page.
	resp, err := http.Get(strings.TrimSuffix(base, "/"))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Request.URL.Path != "/ui/" || !strings.Contains(string(page), "<title>Strom console</title>") {
		t.Fatalf("GET /ui ended at %s with %.200s", resp.Request.URL, page)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	b := &browser{t: t, ctx: bctx, dir: dir}
	if _, err := chromedp.Run(bctx, chromedp.Navigate(base)); err != nil {
		t.Fatal(err)
	}

	t.Run("cluster", func(t *testing.T) {
		b.t = t
		// The page and DescribeCluster agree on each node's id, liveness
		// and feature level, on the cluster's active feature level and on
		// the Raft leader (asked anew at each poll: under load a
		// leadership may move).
		var page struct {
			Rows   [][]string `json:"rows"`
			Leader string     `json:"leader"`
			Level  string     `json:"level"`
		}
		var want []string
		waitFor(b, "the three nodes, the Raft leader and the feature levels", `({rows: `+rowsOf("#nodes")+`, leader: (document.getElementById('raft-leader') || {}).textContent || '', level: (document.getElementById('feature-level') || {}).textContent || ''})`, &page, func() bool {
			dc, err := admin.DescribeCluster(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want = []string{fmt.Sprintf("leader node %d level %d", dc.RaftLeader, dc.ActiveFeatureLevel)}
			for _, n := range dc.Nodes {
				want = append(want, fmt.Sprintf("%d %v %d", n.Id, n.Alive, n.FeatureLevel))
			}
			got := []string{"leader " + page.Leader + " level " + page.Level}
			for _, r := range page.Rows {
				got = append(got, r[0]+" "+strconv.FormatBool(r[3] == "alive")+" "+r[5])
			}
			slices.Sort(want[1:])
			return len(dc.Nodes) == 3 && dc.ActiveFeatureLevel == catalog.SupportedFeatureLevel && slices.Equal(got, want)
		})
		b.shot("cluster")
	})

	t.Run("tables", func(t *testing.T) {
		b.t = t
		names, err := admin.ListTables(ctx, "shop")
		if err != nil {
			t.Fatal(err)
		}
		b.show("#/tables")
		var rows [][]string
		waitFor(b, "the tables of shop", rowsOf("#tables-shop"), &rows, func() bool {
			var got []string
			for _, r := range rows {
				got = append(got, r[0]+" "+r[1]+" "+r[2])
			}
			return slices.Equal(got, []string{"clicks log table 3", "customers primary-key table 2"}) && len(names) == 2
		})
		b.shot("tables")
	})

	t.Run("table", func(t *testing.T) {
		b.t = t
		b.show("#/table/shop/clicks")
		// Each bucket's leader and ISR as the metadata has them, and its
		// high watermark as its leader does (asked anew at each poll).
		var rows [][]string
		waitFor(b, "each bucket's leader, ISR and high watermark", rowsOf("#buckets"), &rows, func() bool {
			info, err := admin.GetTable(ctx, "shop", "clicks")
			if err != nil {
				t.Fatal(err)
			}
			hw, err := clicks.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			var want, got []string // bucket, leader, ISR, high watermark
			total := int64(0)
			for _, bk := range info.Buckets {
				want = append(want, fmt.Sprintf("%d %d %s %d", bk.Bucket, bk.Leader, isr(bk.Isr), hw[bk.Bucket]))
				total += hw[bk.Bucket]
			}
			if total != 30 {
				t.Fatalf("the API's high watermarks add up to %d, want the 30 rows written", total)
			}
			for _, r := range rows {
				got = append(got, strings.Join([]string{r[0], r[1], r[4], r[5]}, " "))
			}
			return slices.Equal(got, want)
		})
		var schema [][]string
		waitFor(b, "the schema", rowsOf("#schema"), &schema, func() bool {
			return fmt.Sprint(schema) == "[[user_id BIGINT NOT NULL - -] [url STRING - -]]"
		})
		b.shot("table")
	})

	t.Run("tail", func(t *testing.T) {
		b.t = t
		hw, err := clicks.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		before := int64(0) // the tail starts 20 offsets before each bucket's end
		for _, o := range hw {
			before += min(o, 20)
		}
		b.show("#/tail/shop/clicks")
		var header []string
		var rows [][]string
		waitFor(b, "the last rows written before", rowsOf("#tail"), &rows, func() bool { return int64(len(rows)) == before })
		// Rows written now appear, newest first.
		appendClicks(1000, 1005)
		waitFor(b, "the rows written during the tail", rowsOf("#tail"), &rows, func() bool {
			return int64(len(rows)) == before+5 && slices.ContainsFunc(rows, func(r []string) bool {
				return len(r) == 6 && r[4] == "1004" && r[5] == "/page/1004"
			})
		})
		b.shot("tail")
		// The column chooser: without url, the fetch is pruned to user_id.
		if err := b.do(`document.querySelector('#columns input[name="url"]').click()`); err != nil {
			t.Fatal(err)
		}
		waitFor(b, "the header without url", `[...document.querySelectorAll('#tail thead th')].map(th => th.textContent)`, &header, func() bool {
			return slices.Equal(header, []string{"_bucket", "_offset", "_timestamp", "_change_type", "user_id"})
		})
		appendClicks(2000, 2003)
		waitFor(b, "new rows with user_id only", rowsOf("#tail"), &rows, func() bool {
			return slices.ContainsFunc(rows, func(r []string) bool { return len(r) == 5 && r[4] == "2002" })
		})
		b.shot("tail-pruned")
	})

	t.Run("lookup", func(t *testing.T) {
		b.t = t
		lk, err := customers.NewLookuper()
		if err != nil {
			t.Fatal(err)
		}
		b.show("#/lookup/shop/customers")
		var ready bool
		waitFor(b, "the lookup form", `!!document.querySelector('#lookup-form input[name="id"]')`, &ready, func() bool { return ready })
		for _, id := range []int32{1, 2, 3, 4, 5, 6, 99} {
			got, err := lk.Lookup(ctx, record.Row{id})
			if err != nil {
				t.Fatal(err)
			}
			want := "not found"
			if got[0] != nil {
				want = fmt.Sprintf("id=%v name=%v", got[0][0], got[0][1])
			}
			if err := b.do(fmt.Sprintf(`(() => {
				document.getElementById('lookup-result').replaceChildren();
				document.querySelector('#lookup-form input[name="id"]').value = %q;
				document.querySelector('#lookup-form button').click();
			})()`, strconv.Itoa(int(id)))); err != nil {
				t.Fatal(err)
			}
			var shown string
			waitFor(b, "the lookup of "+strconv.Itoa(int(id)), `(() => {
				if (document.getElementById('lookup-none')) return 'not found';
				const rows = [...document.querySelectorAll('#lookup-row tbody tr')].map(tr => tr.cells[0].textContent + '=' + tr.cells[1].textContent);
				const err = document.querySelector('#lookup-result .error');
				return err ? 'error: ' + err.textContent : rows.join(' ');
			})()`, &shown, func() bool { return shown == want })
			if id == 2 {
				b.shot("lookup")
			}
		}
	})

	t.Run("throughput", func(t *testing.T) {
		b.t = t
		b.show("#/throughput")
		// Every node holds every bucket of clicks (replication factor 3):
		// rows written show on the console's node as bytes in (a bucket it
		// leads) or replication bytes in (one it follows), as rates above
		// 0 polled from its /metrics.
		var rate float64
		written := int64(0)
		waitFor(b, "a rate of bytes in", `Math.max(...['strom_tabletserver_bytes_in_total', 'strom_tabletserver_replication_bytes_in_total'].map(m =>
			Number((document.querySelector('#totals tr[data-metric="' + m + '"] .rate') || {dataset: {}}).dataset.rate || 0)))`, &rate, func() bool {
			if rate > 0 {
				return true
			}
			if written < 100 { // bounded: 100 rounds of 5 rows at most
				appendClicks(3000+written*5, 3005+written*5)
				written++
			}
			return false
		})
		// The totals are the node's own counters: what /metrics says once
		// nothing writes.
		for _, m := range []string{"strom_tabletserver_messages_in_total", "strom_tabletserver_bytes_in_total"} {
			var shown, want string
			waitFor(b, "the node's "+m, fmt.Sprintf(`(document.querySelector('#totals tr[data-metric=%q] .total') || {}).textContent || ''`, m), &shown, func() bool {
				want = metricOf(t, console.API, m)
				return shown == want
			})
		}
		// A line of a few points, for the screenshot.
		var points int
		waitFor(b, "three points charted", `Number(document.getElementById('chart-bytes').dataset.points || 0)`, &points, func() bool { return points >= 3 })
		b.shot("throughput")
	})

	t.Run("tail-failover", func(t *testing.T) {
		b.t = t
		// A bucket of clicks led by another node than the console's: its
		// leader is killed while the tail is open, and the rows written to
		// the bucket afterwards (so by its new leader) must appear in the
		// tail without a reload. Should the console's node lead every
		// bucket (leaderships move), the page is opened on another node.
		info, err := admin.GetTable(ctx, "shop", "clicks")
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(info.Buckets, func(bk *stromv1.BucketAssignment) bool {
			return bk.Leader >= 0 && bk.Leader != console.ID
		})
		if i < 0 {
			i = slices.IndexFunc(info.Buckets, func(bk *stromv1.BucketAssignment) bool { return bk.Leader >= 0 })
			if i < 0 {
				t.Fatalf("no bucket of clicks has a leader: %v", info.Buckets)
			}
			viewer := c.Nodes()[slices.IndexFunc(c.Nodes(), func(n *testcluster.Node) bool { return n.ID != info.Buckets[i].Leader })]
			t.Logf("node %d leads every bucket of clicks: the tail is opened on node %d", console.ID, viewer.ID)
			if _, err := chromedp.Run(bctx, chromedp.Navigate("http://"+viewer.API+"/ui/")); err != nil {
				t.Fatal(err)
			}
		}
		bucket, old := info.Buckets[i].Bucket, info.Buckets[i].Leader
		b.show("#/tail/shop/clicks")
		var rows [][]string
		waitFor(b, "the tail's first rows", rowsOf("#tail"), &rows, func() bool { return len(rows) > 0 })
		hw, err := clicks.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		c.Kill(int(old))
		t.Logf("killed node %d, leader of bucket %d at offset %d", old, bucket, hw[bucket])
		// acks=1: a write is acknowledged by its bucket's leader alone, so
		// that writes to buckets whose followers include the dead node
		// need not wait for it to leave their ISR.
		w, err := clicks.NewAppendWriter(ctx, client.Acks(1))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close(context.Background())
		acked := map[string]bool{} // user ids written after the kill
		next := int64(5000)
		var seen string
		waitFor(b, fmt.Sprintf("a row of bucket %d past offset %d, from its new leader", bucket, hw[bucket]), rowsOf("#tail"), &rows, func() bool {
			got := map[string]bool{}
			for _, r := range rows {
				if len(r) == 6 && r[0] == strconv.Itoa(int(bucket)) && atoi(t, r[1]) >= hw[bucket] {
					got[r[4]] = true
				}
			}
			for u := range got {
				if !acked[u] {
					t.Fatalf("the tail shows user %s in bucket %d after the kill, which was not written", u, bucket)
				}
			}
			if len(got) > 0 {
				seen = fmt.Sprint(len(got))
				return true
			}
			if next < 5000+5*100 { // bounded: 100 rounds of 5 rows at most, each to a bucket the writer picks
				for u := next; u < next+5; u++ {
					f := w.Append(ctx, record.Row{u, "/page/" + strconv.FormatInt(u, 10)})
					if err := w.Flush(ctx); err != nil {
						t.Fatal(err)
					}
					if _, _, err := f.Wait(ctx); err != nil {
						t.Fatal(err)
					}
					acked[strconv.FormatInt(u, 10)] = true
				}
				next += 5
			}
			return false
		})
		info, err = admin.GetTable(ctx, "shop", "clicks")
		if err != nil {
			t.Fatal(err)
		}
		if l := info.Buckets[i].Leader; l == old || l < 0 {
			t.Fatalf("bucket %d's leader is %d after node %d was killed, yet the tail read rows past its end", bucket, l, old)
		}
		t.Logf("the tail shows %s rows of bucket %d from its new leader, node %d", seen, bucket, info.Buckets[i].Leader)
		b.shot("tail-failover")
	})
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is not a number: %v", s, err)
	}
	return v
}

func isr(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(int(x))
	}
	return "[" + strings.Join(s, ",") + "]"
}

// metricOf returns a metric's value on the node at addr, summed over its
// labels, as the console's parser sums it.
func metricOf(t *testing.T, addr, name string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			f := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
			v, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", name, line, err)
			}
			sum += v
		}
	}
	return strconv.FormatFloat(sum, 'f', -1, 64)
}
