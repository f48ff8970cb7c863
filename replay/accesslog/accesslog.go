// Package accesslog reads HTTP access logs into [Record]s for sluice
// replay: the nginx/Apache common and combined formats, JSON lines and CSV
// with a header row, plain or gzip-compressed, with the format detected
// when not given.
//
// A Reader streams: memory is bounded by one line (at most [MaxLineBytes])
// and a bounded cache of keys, whatever the size of the log. A line that
// cannot be parsed is never fatal: it is counted and, up to
// Options.MaxLineErrors, kept with its line number and the reason
// ([Reader.Skipped]); nor is a truncated or corrupt gzip stream, which
// ends the input as a skipped line. [Reader.Err] reports only I/O errors.
package accesslog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/httplimit"
)

// MaxLineBytes is the longest line a Reader reads; a longer line is
// skipped as a [LineError].
const MaxLineBytes = 64 << 10

// Record is one request of an access log.
type Record struct {
	Time time.Time
	Key  string // the rate-limiting key, as httplimit derives it
	// Keys, with two or more Options.KeysFrom, are the record's keys,
	// one per entry in its order (Key is Keys[0]), "" for one the line
	// lacks; nil otherwise.
	Keys   []string
	Route  string // a logged route (JSON and CSV only), or ""
	Method string // "" if not logged
	Path   string // the request path, without its query string
	Cost   int64  // 1 unless a cost field says otherwise
	Line   int64  // 1-based line number in the (decompressed) input
}

// LineError is a line the Reader skipped.
type LineError struct {
	Line   int64  `json:"line"`
	Reason string `json:"reason"`
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// Format is the format of an access log.
type Format int

// The formats. Common is the NCSA common log format
// (`host ident user [time] "request" status bytes`), Combined adds
// `"referer" "user-agent"`; both accept a trailing rest (nginx's default
// combined format followed by more fields, for instance).
const (
	Auto Format = iota // detect from the first lines
	Common
	Combined
	JSON // one JSON object per line
	CSV  // RFC 4180 comma-separated values, the first line a header naming the columns; spaces and tabs around a cell are ignored
)

var formatNames = [...]string{"auto", "common", "combined", "json", "csv"}

func (f Format) String() string {
	if f >= 0 && int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ParseFormat returns the Format named s ("auto", "common", "combined",
// "json" or "csv").
func ParseFormat(s string) (Format, error) {
	for i, n := range formatNames {
		if n == s {
			return Format(i), nil
		}
	}
	return 0, fmt.Errorf("accesslog: unknown format %q (want auto, common, combined, json or csv)", s)
}

// FieldNames names the fields of JSON lines and the columns of CSV; an
// empty name takes its default. Time and the key's field are required on
// every line; the others are optional.
//
// In JSON, a name with dots also names a member of nested objects:
// "http.client_ip" is the member client_ip of the object http, as Caddy
// and ECS logs nest them, besides a member so named (as ECS also writes
// it); the name of the key (Options.KeyFrom) too. In CSV a name with dots
// is a column name like any other.
//
// A time is one of:
//   - RFC 3339 (2006-01-02T15:04:05.999999999Z07:00, the fraction
//     optional), also with a space for the T, a ',' for the '.', an offset
//     written +0700 or +07, a space before the offset, "UTC" for it, or no
//     offset at all: a time without an offset is UTC;
//   - the common log time, 02/Jan/2006:15:04:05 -0700, with or without
//     its brackets;
//   - a Unix time, a number or a string of one, with or without a
//     fraction, whose unit is told by the magnitude of its integer part:
//     seconds below 1e11, milliseconds below 1e14, microseconds below
//     1e17, nanoseconds from 1e17. Each unit is so read right for times
//     from 3 March 1973 (seconds until the year 5138, nanoseconds until
//     2554).
type FieldNames struct {
	Time   string // default "time"
	Client string // the client address; default "remote_addr"
	Route  string // default "route"
	Method string // default "method"
	Path   string // default "path"; a query string is dropped
	Cost   string // default "cost"; a positive integer
}

func (f FieldNames) withDefaults() FieldNames {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&f.Time, "time")
	def(&f.Client, "remote_addr")
	def(&f.Route, "route")
	def(&f.Method, "method")
	def(&f.Path, "path")
	def(&f.Cost, "cost")
	return f
}

// Options configures a Reader. The zero value detects the format, keys
// by client address and keeps the first 100 line errors.
type Options struct {
	Format Format
	Fields FieldNames
	// KeyFrom chooses the key: "" or "client" is the client address as
	// httplimit.RemoteAddr keys it (IPv4 as is, IPv6 grouped by /64);
	// any other name is a logged value, keyed as httplimit.Header keys
	// a header (values over 64 bytes hashed). In JSON and CSV it names
	// a field; in the common and combined formats it is "user",
	// "referer" or "user_agent" (the last two combined only).
	KeyFrom string
	// KeysFrom, when not empty, keys every record several ways, as many
	// policies keyed differently (by client address, by a tenant's
	// header) need: one key per entry, each chosen as KeyFrom chooses,
	// in Record.Keys; KeyFrom is then ignored. With two or more, a key a
	// line lacks (an empty or missing value, a client address that is
	// none) is "" and the line is kept: whether a request without it
	// counts depends on the policies. With one, such a line is skipped.
	KeysFrom []string
	// MaxLineErrors is how many LineErrors Skipped keeps (all are
	// counted); 0 means 100, a negative value none.
	MaxLineErrors int
}

// ErrEmpty is returned by NewReader when the format is to be detected and
// the input has no non-empty line.
var ErrEmpty = errors.New("accesslog: the input is empty: no format to detect")

// Reader reads Records from an access log. It is not safe for concurrent
// use.
type Reader struct {
	br      *bufio.Reader
	gz      *gzipSource // nil unless the input is gzip
	opts    Options
	fields  FieldNames
	format  Format
	maxErrs int

	line    int64  // the number of the line being parsed
	read    int64  // how many lines were read from the input
	held    []held // lines read ahead by detection
	err     error
	ended   bool // the end of the input was reached (and a broken stream reported)
	skipped int64
	first   []LineError

	keySpecs []keySpec // how each key of a record is chosen, in order
	keyReq   http.Request
	keyAddr  httplimit.KeyFunc
	keyHdr   httplimit.KeyFunc
	hdrVal   []string
	addrKeys map[string]string // client address -> key, bounded by maxKeyCache
	valKeys  map[string]string // logged value -> key, likewise
	zones    zoneCache

	csv csvState
	js  jsonState
}

const maxKeyCache = 1 << 16

// NewReader returns a Reader of r. It reads the first lines when the
// format is to be detected, and the header row of CSV; the error is about
// these, or about opts. A gzip stream (by its magic bytes) is read
// decompressed, its members one after the other, and a leading UTF-8
// byte order mark is dropped.
//
// A gzip stream that is truncated, corrupt or followed by garbage ends
// the input there, without an error: the records read before stand, an
// incomplete line at the break is dropped, and the break is a skipped
// line (numbered after the last complete line, with a reason such as
// "gzip stream truncated after line N: unexpected EOF"). An error of r
// itself is an I/O error: it ends reading and is [Reader.Err].
// Detection reads the first lines ahead, keeping a copy of at most five
// non-empty ones (lines too long to read are skipped, not counted).
func NewReader(r io.Reader, opts Options) (*Reader, error) {
	if opts.Format < Auto || opts.Format > CSV {
		return nil, fmt.Errorf("accesslog: unknown format %v", opts.Format)
	}
	in := &errSource{r: r}
	br := bufio.NewReaderSize(in, MaxLineBytes)
	var gz *gzipSource
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("accesslog: gzip: %w", err)
		}
		gz = &gzipSource{zr: zr, in: in}
		br = bufio.NewReaderSize(gz, MaxLineBytes)
	}
	if bom, _ := br.Peek(3); string(bom) == "\ufeff" {
		br.Discard(3) // a UTF-8 byte order mark, as spreadsheets write
	}
	rd := &Reader{br: br, gz: gz, opts: opts, fields: opts.Fields.withDefaults(), format: opts.Format,
		maxErrs: opts.MaxLineErrors, addrKeys: make(map[string]string), valKeys: make(map[string]string)}
	if rd.maxErrs == 0 {
		rd.maxErrs = 100
	}
	rd.hdrVal = []string{""}
	rd.keyReq.Header = http.Header{"X-Key": rd.hdrVal}
	rd.keyAddr = httplimit.RemoteAddr()
	rd.keyHdr = httplimit.Header("X-Key")
	if rd.format == Auto {
		f, err := rd.detect()
		if err != nil {
			return nil, err
		}
		rd.format = f
	}
	if err := rd.setup(); err != nil {
		return nil, err
	}
	return rd, nil
}

// keySpec is how one key of a record is chosen: a CLF field (clfClient,
// clfUser, ...) in the common and combined formats, a field in JSON and
// CSV ("" for the client address).
type keySpec struct {
	clf   int
	field string
}

func (rd *Reader) setup() error {
	from := rd.opts.KeysFrom
	if len(from) == 0 {
		from = []string{rd.opts.KeyFrom}
	}
	for _, name := range from {
		spec, err := rd.keySpec(name)
		if err != nil {
			return err
		}
		rd.keySpecs = append(rd.keySpecs, spec)
	}
	switch rd.format {
	case JSON, CSV:
		f := rd.fields
		names := []string{f.Time, f.Client, f.Route, f.Method, f.Path, f.Cost}
		for _, spec := range rd.keySpecs {
			names = append(names, spec.field)
		}
		rd.js.init(names...)
		if rd.format == JSON {
			return nil
		}
		return rd.readCSVHeader()
	}
	return nil
}

// keySpec returns how the key name (as Options.KeyFrom names it) is
// chosen in the format being read.
func (rd *Reader) keySpec(name string) (keySpec, error) {
	switch rd.format {
	case Common, Combined:
		switch name {
		case "", "client":
			return keySpec{clf: clfClient}, nil
		case "user":
			return keySpec{clf: clfUser}, nil
		case "referer", "user_agent":
			if rd.format != Combined {
				return keySpec{}, fmt.Errorf("accesslog: the key field %q needs the combined format, not common", name)
			}
			if name == "user_agent" {
				return keySpec{clf: clfAgent}, nil
			}
			return keySpec{clf: clfReferer}, nil
		}
		if rd.format == Common {
			return keySpec{}, fmt.Errorf("accesslog: the key field %q is not in the common format: key by client or user (referer and user_agent need the combined format)", name)
		}
		return keySpec{}, fmt.Errorf("accesslog: the key field %q is not in the combined format: key by client, user, referer or user_agent", name)
	}
	if name == "client" {
		name = ""
	}
	return keySpec{field: name}, nil
}

// Format returns the format being read (the detected one under Auto).
func (rd *Reader) Format() Format { return rd.format }

// Next returns the next Record, or false at the end of the input or on an
// I/O error ([Reader.Err]). Lines it cannot parse are skipped and counted.
func (rd *Reader) Next() (Record, bool) {
	for {
		line, ok := rd.readLine()
		if !ok {
			return Record{}, false
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec Record
		var reason string
		switch rd.format {
		case Common, Combined:
			reason = rd.parseCLF(line, &rec)
		case JSON:
			reason = rd.parseJSON(line, &rec)
		case CSV:
			reason = rd.parseCSV(line, &rec)
		}
		if reason != "" {
			rd.skip(reason)
			continue
		}
		rec.Line = rd.line
		return rec, true
	}
}

// Err returns the I/O error that ended reading, or nil at the end of the
// input.
func (rd *Reader) Err() error { return rd.err }

// Skipped returns how many lines were skipped and the first of them, in
// order (at most Options.MaxLineErrors).
func (rd *Reader) Skipped() (count int64, first []LineError) { return rd.skipped, rd.first }

func (rd *Reader) skip(reason string) {
	rd.skipped++
	if len(rd.first) < rd.maxErrs {
		rd.first = append(rd.first, LineError{Line: rd.line, Reason: reason})
	}
}

// recordKeys returns a record's key and, with several, its keys, each
// chosen by keyOf from its spec ("" for one keyOf gives a reason
// against), or, with one, the reason for skipping the line.
func (rd *Reader) recordKeys(keyOf func(keySpec) (key, reason string)) (key string, keys []string, reason string) {
	if len(rd.keySpecs) == 1 {
		key, reason = keyOf(rd.keySpecs[0])
		return key, nil, reason
	}
	keys = make([]string, len(rd.keySpecs))
	for i, spec := range rd.keySpecs {
		if k, reason := keyOf(spec); reason == "" {
			keys[i] = k
		}
	}
	return keys[0], keys, ""
}

// clientKey keys by a client address as httplimit.RemoteAddr does.
func (rd *Reader) clientKey(addr []byte) (string, string) {
	if k, ok := rd.addrKeys[string(addr)]; ok {
		return k, ""
	}
	rd.keyReq.RemoteAddr = string(addr)
	k, err := rd.keyAddr(&rd.keyReq)
	if err != nil {
		return "", fmt.Sprintf("client address %q is not an IP address", truncate(addr))
	}
	remember(rd.addrKeys, rd.keyReq.RemoteAddr, k)
	return k, ""
}

// valueKey keys by a logged value as httplimit.Header keys by a header.
func (rd *Reader) valueKey(name string, v []byte) (string, string) {
	if len(v) == 0 {
		return "", fmt.Sprintf("no key: %s is empty or missing", name)
	}
	if k, ok := rd.valKeys[string(v)]; ok {
		return k, ""
	}
	rd.hdrVal[0] = string(v)
	k, err := rd.keyHdr(&rd.keyReq)
	if err != nil {
		return "", fmt.Sprintf("no key: %s: %v", name, err)
	}
	remember(rd.valKeys, rd.hdrVal[0], k)
	return k, ""
}

func remember(cache map[string]string, raw, key string) {
	if len(cache) >= maxKeyCache {
		clear(cache)
	}
	cache[raw] = key
}

// truncate bounds a value quoted in a reason.
func truncate(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(b)
}
