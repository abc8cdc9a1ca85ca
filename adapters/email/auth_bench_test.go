package email

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
)

// What sender verification costs, each benchmark beside its baseline: the
// same message without a DKIM-Signature, normalised the same way (stored in
// a dropzone batch, read back from it, as the receiver and the IMAP source
// do). The key is cached after the first message, as it is for a sender
// who writes often.
//
//	go test -run '^$' -bench 'Normalize(Signed|Unsigned)' -benchmem ./adapters/email

// BenchmarkNormalizeSigned: the typical 5 KB message, signed with RSA-2048
// (relaxed/relaxed): the header parsed twice, the body hashed, one RSA
// verification.
func BenchmarkNormalizeSigned(b *testing.B) { benchAuth(b, typicalUnsigned(), true) }

// BenchmarkNormalizeUnsigned is BenchmarkNormalizeSigned's baseline.
func BenchmarkNormalizeUnsigned(b *testing.B) { benchAuth(b, typicalUnsigned(), false) }

// BenchmarkNormalizeNoKey: the typical message with a signature whose key
// is not published (the emailbench fetch's mail, and forged signatures):
// the header is read again and the lookup answered from the cache; no
// body is hashed.
func BenchmarkNormalizeNoKey(b *testing.B) { benchAuth(b, typicalMessage(), false) }

// BenchmarkNormalizeSignedLarge: a message with a 16 MB attachment. The
// body is hashed as it streams, so the memory held does not grow with it:
// peak-heap-B (the most heap in use while it runs, sampled) is to be
// compared with BenchmarkNormalizeUnsignedLarge's. B/op is not: go-msgauth's
// canonicalisers allocate a buffer per 32 KB written, garbage the size of
// the message, never held.
func BenchmarkNormalizeSignedLarge(b *testing.B) { benchAuth(b, largeUnsigned(16<<20), true) }

// BenchmarkNormalizeUnsignedLarge is BenchmarkNormalizeSignedLarge's
// baseline.
func BenchmarkNormalizeUnsignedLarge(b *testing.B) { benchAuth(b, largeUnsigned(16<<20), false) }

// typicalUnsigned is typicalMessage without its (fake) signature.
func typicalUnsigned() []byte {
	raw := typicalMessage()
	i := bytes.Index(raw, []byte("DKIM-Signature:"))
	j := bytes.Index(raw, []byte("Message-ID:"))
	return append(raw[:i:i], raw[j:]...)
}

// largeUnsigned is a short message with an attachment of n bytes.
func largeUnsigned(n int) []byte {
	var b strings.Builder
	b.WriteString("From: Ann <ann@example.com>\r\nTo: agent@monoco.dev\r\nSubject: the dump\r\nDate: Fri, 06 Feb 2026 19:30:00 +0100\r\n" +
		"Message-ID: <large@example.com>\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"mix\"\r\n\r\n" +
		"--mix\r\nContent-Type: text/plain\r\n\r\nAttached.\r\n--mix\r\nContent-Type: application/octet-stream; name=\"dump.bin\"\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("courier large attachment "), n/25))
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n--mix--\r\n")
	return []byte(b.String())
}

func benchAuth(b *testing.B, raw []byte, signed bool) {
	dns := newTestDNS()
	if signed {
		k := newKey(b, dns, "example.com", "s1", true)
		// sign makes LF line ends CRLF; raw has CRLF already.
		raw = k.sign(b, strings.ReplaceAll(string(raw), "\r\n", "\n"))
	}
	v := NewVerifier(&VerifierOptions{LookupTXT: dns.LookupTXT})
	s := testutil.NewDropzone(b, nil)
	opts := normOptions()
	opts.Verifier = v
	b.SetBytes(int64(len(raw)))
	// The message is read from a file, as it comes off the network: held
	// here, its bytes would raise the GC's goal and hide what the
	// normalisation itself holds.
	src := filepath.Join(b.TempDir(), "message.eml")
	if err := os.WriteFile(src, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	raw = nil
	b.ReportAllocs()
	peak := samplePeakHeap()
	defer func() { b.ReportMetric(float64(peak()), "peak-heap-B") }()
	for b.Loop() {
		batch := s.NewBatch()
		in, err := os.Open(src)
		if err != nil {
			b.Fatal(err)
		}
		obj, err := batch.Put(in)
		in.Close()
		if err != nil {
			b.Fatal(err)
		}
		f, err := batch.Open(obj)
		if err != nil {
			b.Fatal(err)
		}
		m, err := Normalize(f, batch, obj, opts)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		if a := m.Metadata.Extra.Auth; a.Verified != signed {
			b.Fatalf("verified %v (%+v), want %v", a.Verified, a.DKIMSignatures, signed)
		}
		batch.Abort()
	}
}

// samplePeakHeap samples the heap in use every millisecond until the
// function it returns is called, which returns the most seen above what
// was in use at the start (after a GC).
func samplePeakHeap() func() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var (
		mu   sync.Mutex
		peak uint64
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			runtime.ReadMemStats(&ms)
			mu.Lock()
			if ms.HeapInuse > base && ms.HeapInuse-base > peak {
				peak = ms.HeapInuse - base
			}
			mu.Unlock()
		}
	}()
	return func() uint64 {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// BenchmarkNormalizeSignedInMemory is BenchmarkNormalizeSigned for a
// message held in memory, as IMAP fetches most: DKIM reads the bytes
// given in NormalizeOptions.Raw instead of opening the stored copy again.
func BenchmarkNormalizeSignedInMemory(b *testing.B) {
	dns := newTestDNS()
	k := newKey(b, dns, "example.com", "s1", true)
	raw := k.sign(b, strings.ReplaceAll(string(typicalUnsigned()), "\r\n", "\n"))
	opts := normOptions()
	opts.Verifier = NewVerifier(&VerifierOptions{LookupTXT: dns.LookupTXT})
	s := testutil.NewDropzone(b, nil)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for _, mem := range []bool{false, true} {
		b.Run(map[bool]string{false: "reopened", true: "raw"}[mem], func(b *testing.B) {
			for b.Loop() {
				batch := s.NewBatch()
				obj, err := batch.Put(bytes.NewReader(raw))
				if err != nil {
					b.Fatal(err)
				}
				o := opts
				if mem {
					o.Raw = raw
				}
				m, err := Normalize(bytes.NewReader(raw), batch, obj, o)
				if err != nil {
					b.Fatal(err)
				}
				if !m.Metadata.Extra.Auth.Verified {
					b.Fatalf("not verified: %+v", m.Metadata.Extra.Auth.DKIMSignatures)
				}
				batch.Abort()
			}
		})
	}
}
