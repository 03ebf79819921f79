package log

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Small files written whole: checkpoints, snapshots, sealed indexes.

const (
	// hwFile holds the high watermark checkpoint.
	hwFile = "high-watermark"
	// recoveryPointFile holds the recovery point: the base offset of the
	// first segment not known to be fsynced (Kafka's recovery point, at
	// segment granularity). Recovery trusts the segments before it and
	// scans the rest.
	recoveryPointFile = "recovery-point"
	// cleanFile exists only between a clean Close and the next Open.
	cleanFile = "clean-shutdown"
)

// writeFileAtomic replaces dir/name with data so that after a crash the
// file holds either its old or its new contents: write name.tmp, fsync it,
// rename it over name. The caller fsyncs dir (once for several files) to
// make the rename durable. With noSync nothing is fsynced (the rename still
// makes a killed process leave whole files).
func writeFileAtomic(fs vfs.FS, dir, name string, data []byte, noSync bool) error {
	tmp := filepath.Join(dir, name+tmpSuffix)
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && !noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		fs.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// syncDir makes the directory's entries (created, renamed, removed files)
// durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// CreateDir creates dir and its missing parents on fs, durably: the
// entry of each directory it creates is fsynced in its parent (as Pebble's
// mkdirAllAndSyncParents), so a power cut cannot take away a directory
// whose files were fsynced. With noSync nothing is fsynced.
func CreateDir(fs vfs.FS, dir string, noSync bool) error {
	var created []string // the directories to create, deepest first
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if noSync {
		return nil
	}
	for _, d := range created {
		if err := syncDir(fs, filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// encodeOffset is the format of the high watermark and recovery point
// files: a version line (0) and the offset.
func encodeOffset(o int64) []byte {
	return []byte("0\n" + strconv.FormatInt(o, 10) + "\n")
}

// readOffset reads a file written with encodeOffset; ok is false when
// there is none.
func readOffset(fs vfs.FS, dir, name string) (o int64, ok bool, err error) {
	data, err := readFile(fs, filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "0" {
		return 0, false, fmt.Errorf("%s: want a version line \"0\" and an offset line, have %q", name, data)
	}
	o, err = strconv.ParseInt(lines[1], 10, 64)
	if err != nil || o < 0 {
		return 0, false, fmt.Errorf("%s: offset line %q is not an offset", name, lines[1])
	}
	return o, true, nil
}

// readFile is os.ReadFile on fs.
func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// truncater is a file that can be cut: vfs.Default's files (through
// *os.File) and internal/strictfs's.
type truncater interface{ Truncate(size int64) error }

// truncateFile cuts f to size bytes.
func truncateFile(f vfs.File, size int64) error {
	tf, ok := f.(truncater)
	if !ok {
		return fmt.Errorf("log: the file system's %T cannot be truncated", f)
	}
	return tf.Truncate(size)
}
