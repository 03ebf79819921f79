package strictfs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func mustCreate(t *testing.T, fs *FS, name string, data string) vfs.File {
	t.Helper()
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	return f
}

func syncDir(t *testing.T, fs vfs.FS, dir string) {
	t.Helper()
	d, err := fs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func contents(t *testing.T, fs vfs.FS, name string) (string, bool) {
	t.Helper()
	f, err := fs.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func TestCrashKeepsOnlySyncedData(t *testing.T) {
	fs := New()
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	syncDir(t, fs, "/")
	f := mustCreate(t, fs, "/d/a", "synced")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	syncDir(t, fs, "/d")
	if _, err := f.Write([]byte(" lost")); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, fs, "/d/b", "never synced") // nor its directory entry
	c := fs.Crash(vfs.CrashCloneCfg{})
	if got, _ := contents(t, c, "/d/a"); got != "synced" {
		t.Errorf("a after the crash = %q, want %q", got, "synced")
	}
	if _, ok := contents(t, c, "/d/b"); ok {
		t.Error("b, whose directory entry was never synced, survived the crash")
	}
	if got, _ := contents(t, fs, "/d/a"); got != "synced lost" {
		t.Errorf("the crashed file system changed: a = %q", got)
	}
	if err := f.Sync(); !errors.Is(err, ErrPowerOff) {
		t.Errorf("fsync after the crash: %v, want ErrPowerOff", err)
	}
	if _, err := c.Create("/d/c", vfs.WriteCategoryUnspecified); err != nil {
		t.Errorf("the crash's result: %v", err)
	}
}

// truncatable creates /a (through a rename from /a.tmp, which the open
// file follows) holding 0123456789, fsynced with its directory, and
// truncates it to 4 bytes.
func truncatable(t *testing.T) (*FS, vfs.File) {
	fs := New()
	f := mustCreate(t, fs, "/a.tmp", "0123456789")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Rename("/a.tmp", "/a"); err != nil {
		t.Fatal(err)
	}
	syncDir(t, fs, "/")
	if err := f.(*file).Truncate(4); err != nil {
		t.Fatal(err)
	}
	return fs, f
}

func TestTruncateIsDurableOnceSynced(t *testing.T) {
	fs, _ := truncatable(t)
	if got, _ := contents(t, fs.Crash(vfs.CrashCloneCfg{}), "/a"); got != "0123456789" {
		t.Errorf("an unsynced truncation survived the crash: a = %q", got)
	}

	fs, f := truncatable(t)
	if _, err := f.WriteAt([]byte("ab"), 4); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := f.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, []byte("0123ab")) {
		t.Errorf("ReadAt after Truncate = %q, %v", buf, err)
	}
	if err := f.(*file).Truncate(100); err == nil {
		t.Error("truncating past the end succeeded")
	}
	if got, _ := contents(t, fs.Crash(vfs.CrashCloneCfg{}), "/a"); got != "0123ab" {
		t.Errorf("after truncate, write, sync and a crash: a = %q, want %q", got, "0123ab")
	}
}
