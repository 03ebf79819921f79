package remote_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"strom/remote"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want remote.Location
	}{
		{"file:///var/lib/strom/remote", remote.Location{Scheme: "file", Dir: "/var/lib/strom/remote"}},
		{"file://./strom-data/remote", remote.Location{Scheme: "file", Dir: "./strom-data/remote"}},
		{"file://../up", remote.Location{Scheme: "file", Dir: "../up"}},
		{"s3://bucket", remote.Location{Scheme: "s3", Bucket: "bucket"}},
		{"s3://bucket/", remote.Location{Scheme: "s3", Bucket: "bucket"}},
		{"s3://bucket/a/b/", remote.Location{Scheme: "s3", Bucket: "bucket", Prefix: "a/b"}},
	} {
		got, err := remote.ParseURL(tc.url)
		if err != nil || got != tc.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.url, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ url, says string }{
		{"", "no scheme"},
		{"/plain/path", "no scheme"},
		{"ftp://host/x", `unsupported scheme "ftp": want file:// or s3://`},
		{"file://host/x", "a file URL has no host"},
		{"file:///", "want file:///absolute/path"},
		{"s3:///prefix", "want s3://bucket/prefix"},
		{"s3://bucket/a//b", "prefix"},
		{"s3://bucket/x?versionId=1", "no user, query or fragment"},
		{"s3://key:secret@bucket/x", "no user, query or fragment"},
		{"file://./%zz", "invalid URL escape"},
	} {
		_, err := remote.ParseURL(tc.url)
		var ue *remote.URLError
		if !errors.Is(err, remote.ErrInvalidURL) || !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.says) ||
			!strings.Contains(err.Error(), "remote.data.dir") {
			t.Errorf("ParseURL(%q) = %v; want ErrInvalidURL naming remote.data.dir and saying %q", tc.url, err, tc.says)
		}
	}
}

func TestOpenFileURL(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s, err := remote.Open(t.Context(), "file://./sub/remote", remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(t.Context(), "a/b", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "sub/remote/a/b")); len(m) != 1 {
		t.Errorf("file://./sub/remote did not put a/b at ./sub/remote/a/b: %v", m)
	}
	if _, err := remote.Open(t.Context(), "gs://bucket", remote.Options{}); !errors.Is(err, remote.ErrInvalidURL) {
		t.Errorf("Open of gs://: got %v, want ErrInvalidURL", err)
	}
}
