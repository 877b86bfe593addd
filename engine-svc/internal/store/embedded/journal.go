package embedded

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The journal is a sequence of records, one per write command (or one per
// MULTI…EXEC transaction), in the order the commands ran:
//
//	[4-byte little-endian payload length][4-byte CRC-32C of the payload][payload]
//
// payload = uvarint #commands, then per command uvarint #args and per arg
// uvarint length + bytes. Journals are numbered (generations); the base
// file names the first generation it does not contain.

const (
	journalPrefix = "store.journal."
	recordHeader  = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// journalName is the file of generation gen.
func journalName(gen int64) string { return fmt.Sprintf("%s%08d", journalPrefix, gen) }

// encodeRecord appends one record holding cmds to dst.
func encodeRecord(dst []byte, cmds [][]string) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recordHeader)...)
	dst = binary.AppendUvarint(dst, uint64(len(cmds)))
	for _, c := range cmds {
		dst = binary.AppendUvarint(dst, uint64(len(c)))
		for _, a := range c {
			dst = binary.AppendUvarint(dst, uint64(len(a)))
			dst = append(dst, a...)
		}
	}
	payload := dst[start+recordHeader:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, castagnoli))
	return dst
}

// decodePayload parses a record's payload (already checksummed).
func decodePayload(p []byte) ([][]string, error) {
	r := bytes.NewReader(p)
	n, err := binary.ReadUvarint(r)
	if err != nil || n == 0 || n > uint64(len(p)) {
		return nil, errors.New("bad command count")
	}
	cmds := make([][]string, 0, n)
	for range n {
		na, err := binary.ReadUvarint(r)
		if err != nil || na == 0 || na > uint64(len(p)) {
			return nil, errors.New("bad argument count")
		}
		args := make([]string, 0, na)
		for range na {
			l, err := binary.ReadUvarint(r)
			if err != nil || l > uint64(r.Len()) {
				return nil, errors.New("bad argument length")
			}
			b := make([]byte, l)
			if _, err := io.ReadFull(r, b); err != nil {
				return nil, err
			}
			args = append(args, string(b))
		}
		cmds = append(cmds, args)
	}
	if r.Len() != 0 {
		return nil, errors.New("trailing bytes in record")
	}
	return cmds, nil
}

// tornTail describes a dropped incomplete last record.
type tornTail struct {
	Offset, Bytes int64
}

// readJournal calls apply for each record of the file. A record that is
// incomplete at the very end of the last journal (a crash mid-append) is
// dropped and reported; any other fault is an error naming the file and
// the offset.
func readJournal(path string, last bool, apply func([][]string)) (records int, torn *tornTail, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, fmt.Errorf("embedded: read journal: %w", err)
	}
	off := 0
	corrupt := func(why string) error {
		return fmt.Errorf("embedded: journal %s is corrupt at offset %d (%s); the store was not opened. Restore the data directory from a backup, or move the file aside to lose the writes it holds", path, off, why)
	}
	for off < len(data) {
		rest := data[off:]
		tear := func() (int, *tornTail, error) {
			if !last {
				return records, nil, corrupt("incomplete record in a journal that is not the last")
			}
			return records, &tornTail{Offset: int64(off), Bytes: int64(len(rest))}, nil
		}
		if len(rest) < recordHeader || allZero(rest) {
			// A partial header, or a tail the file system extended the
			// file with before the data arrived.
			return tear()
		}
		n := int(binary.LittleEndian.Uint32(rest))
		sum := binary.LittleEndian.Uint32(rest[4:])
		if n > len(rest)-recordHeader {
			// Runs past the end: a torn append, or a zero-filled tail the
			// file system extended the file with.
			return tear()
		}
		payload := rest[recordHeader : recordHeader+n]
		if crc32.Checksum(payload, castagnoli) != sum {
			if recordHeader+n == len(rest) {
				return tear() // the last record, half on disk
			}
			return records, nil, corrupt("checksum mismatch")
		}
		cmds, derr := decodePayload(payload)
		if derr != nil {
			return records, nil, corrupt(derr.Error())
		}
		apply(cmds)
		records++
		off += recordHeader + n
	}
	return records, nil, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// journalGens lists the generations of the journal files in dir, sorted.
func journalGens(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("embedded: list data dir: %w", err)
	}
	var gens []int64
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, journalPrefix) {
			continue
		}
		g, err := strconv.ParseInt(strings.TrimPrefix(name, journalPrefix), 10, 64)
		if err != nil || g < 0 {
			continue // not ours (e.g. an editor's backup)
		}
		gens = append(gens, g)
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
	return gens, nil
}

// removeJournalsBefore deletes journals a base at generation gen covers.
func removeJournalsBefore(dir string, gen int64) error {
	gens, err := journalGens(dir)
	if err != nil {
		return err
	}
	for _, g := range gens {
		if g < gen {
			if err := os.Remove(filepath.Join(dir, journalName(g))); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("embedded: remove old journal: %w", err)
			}
		}
	}
	return nil
}
