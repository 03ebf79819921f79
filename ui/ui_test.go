package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeNode is a node's API as the forwarder sees it: it records what
// reached it.
type fakeNode struct {
	got []string // "path body"
}

func (f *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.got = append(f.got, r.URL.Path+" "+string(b))
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"buckets":[]}`)
}

func newTestConsole(t *testing.T) (*httptest.Server, *fakeNode) {
	node := &fakeNode{}
	backend := httptest.NewServer(node)
	t.Cleanup(backend.Close)
	addr := strings.TrimPrefix(backend.URL, "http://")
	console := httptest.NewServer(Handler(Config{NodeAddress: func(id int32) string {
		if id == 2 {
			return addr
		}
		return ""
	}}))
	t.Cleanup(console.Close)
	return console, node
}

func TestAssetsAreServed(t *testing.T) {
	console, _ := newTestConsole(t)
	for _, tc := range []struct{ path, want string }{
		{"/ui/", `<script src="app.js">`},
		{"/ui/app.js", "function route()"},
		{"/ui/style.css", "table {"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := http.Get(console.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || !strings.Contains(string(b), tc.want) {
				t.Fatalf("GET %s: %d, body without %q:\n%.300s", tc.path, resp.StatusCode, tc.want, b)
			}
		})
	}
}

// TestForwarderSendsOnlyReads: the four data-path reads reach the node
// named, path and body as sent; any other method (every write, the admin
// calls), an unknown node and an oversized body are refused before
// anything reaches a node.
func TestForwarderSendsOnlyReads(t *testing.T) {
	console, node := newTestConsole(t)
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(console.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, m := range []string{"DescribeBuckets", "FetchLog", "ListOffsets", "Lookup"} {
		if code, body := post("/ui/node/2/strom.v1.TabletService/"+m, `{"table":"t"}`); code != 200 || body != `{"buckets":[]}` {
			t.Fatalf("%s: %d %s", m, code, body)
		}
	}
	want := []string{
		`/strom.v1.TabletService/DescribeBuckets {"table":"t"}`,
		`/strom.v1.TabletService/FetchLog {"table":"t"}`,
		`/strom.v1.TabletService/ListOffsets {"table":"t"}`,
		`/strom.v1.TabletService/Lookup {"table":"t"}`,
	}
	if strings.Join(node.got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the node got\n%s\nwant\n%s", strings.Join(node.got, "\n"), strings.Join(want, "\n"))
	}
	node.got = nil
	for _, tc := range []struct {
		name, path, body string
		code             int
		says             string
	}{
		{"write", "/ui/node/2/strom.v1.TabletService/ProduceLog", `{}`, 404, "not forwarded"},
		{"kv write", "/ui/node/2/strom.v1.TabletService/PutKv", `{}`, 404, "not forwarded"},
		{"admin", "/ui/node/2/strom.v1.AdminService/DropTable", `{}`, 404, "not forwarded"},
		{"replication", "/ui/node/2/strom.v1.ReplicaService/FetchReplica", `{}`, 404, "not forwarded"},
		{"unknown node", "/ui/node/3/strom.v1.TabletService/FetchLog", `{}`, 404, "node 3 is not known"},
		{"bad node id", "/ui/node/x/strom.v1.TabletService/FetchLog", `{}`, 400, "not a number"},
		{"large body", "/ui/node/2/strom.v1.TabletService/FetchLog", strings.Repeat("x", MaxForwardBytes+1), 413, "limited to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(tc.path, tc.body)
			if code != tc.code || !strings.Contains(body, tc.says) {
				t.Fatalf("%s: %d %q, want %d saying %q", tc.path, code, body, tc.code, tc.says)
			}
		})
	}
	if len(node.got) != 0 {
		t.Fatalf("refused calls reached the node: %q", node.got)
	}
}
