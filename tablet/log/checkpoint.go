package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
func writeFileAtomic(dir, name string, data []byte, noSync bool) error {
	tmp := filepath.Join(dir, name+tmpSuffix)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
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
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// syncDir makes the directory's entries (created, renamed, removed files)
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
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

// encodeOffset is the format of the high watermark and recovery point
// files: a version line (0) and the offset.
func encodeOffset(o int64) []byte {
	return []byte("0\n" + strconv.FormatInt(o, 10) + "\n")
}

// readOffset reads a file written with encodeOffset; ok is false when
// there is none.
func readOffset(dir, name string) (o int64, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
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
