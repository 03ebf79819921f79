package server

import (
	"strings"
	"testing"

	"strom/remote"
)

func TestRemoteKeys(t *testing.T) {
	def := DefaultConfig()
	for _, tc := range []struct{ dataDir, want string }{
		{def.DataDir, "file://./strom-data/remote"},
		{"/var/lib/strom", "file:///var/lib/strom/remote"},
		{"data", "file://./data/remote"},
		{"../data", "file://../data/remote"},
	} {
		c := def
		c.DataDir = tc.dataDir
		if got := c.RemoteURL(); got != tc.want {
			t.Errorf("data.dir %q: remote URL %q, want %q", tc.dataDir, got, tc.want)
		}
		if _, err := remote.ParseURL(c.RemoteURL()); err != nil {
			t.Errorf("data.dir %q: %v", tc.dataDir, err)
		}
	}
	if o := def.RemoteOptions(); o.S3.VirtualHost {
		t.Errorf("default options address buckets by virtual host: %+v", o)
	}

	cfg := DefaultConfig()
	env := map[string]string{
		"STROM_REMOTE_DATA_DIR":      "s3://bucket/strom",
		"STROM_S3_ENDPOINT":          "http://127.0.0.1:7070",
		"STROM_S3_REGION":            "eu-west-1",
		"STROM_S3_ACCESS_KEY":        "AK",
		"STROM_S3_SECRET_KEY":        "SK",
		"STROM_S3_PATH_STYLE_ACCESS": "false",
	}
	if err := cfg.LoadEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	want := remote.S3Options{Endpoint: "http://127.0.0.1:7070", Region: "eu-west-1", AccessKey: "AK", SecretKey: "SK", VirtualHost: true}
	if cfg.RemoteURL() != "s3://bucket/strom" || cfg.RemoteOptions().S3 != want {
		t.Fatalf("remote URL %q, options %+v; want s3://bucket/strom, %+v", cfg.RemoteURL(), cfg.RemoteOptions().S3, want)
	}

	for _, tc := range []struct {
		name  string
		set   func(*Config)
		wants []string
	}{
		{"scheme", func(c *Config) { c.RemoteDataDir = "ftp://host/x" }, []string{`remote.data.dir: "ftp://host/x": unsupported scheme "ftp"`, "want file:// or s3://"}},
		{"no scheme", func(c *Config) { c.RemoteDataDir = "/plain/path" }, []string{`remote.data.dir: "/plain/path": no scheme`, "file:///absolute/path"}},
		{"file host", func(c *Config) { c.RemoteDataDir = "file://data/x" }, []string{"remote.data.dir", "file://./relative/path"}},
		{"no bucket", func(c *Config) { c.RemoteDataDir = "s3:///x" }, []string{"remote.data.dir", "want s3://bucket/prefix"}},
		{"endpoint", func(c *Config) { c.S3Endpoint = "127.0.0.1:7070" }, []string{"s3.endpoint: want http://host[:port]"}},
		{"half the credentials", func(c *Config) { c.S3AccessKey = "AK" }, []string{"s3.access-key: and s3.secret-key must be set together"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.set(&c)
			err := c.Validate()
			for _, w := range tc.wants {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %v, want it to say %q", err, w)
				}
			}
		})
	}
}
