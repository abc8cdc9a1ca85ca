package schema_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/monoco/courier/schema"
)

// Every field of the front matter structs reaches the file and comes back:
// a field the encoder or an IsZero method does not know fails here rather
// than vanishing from the files. The values are set by reflection, so a
// new field is covered without a line here.

var (
	timeT   = reflect.TypeFor[schema.Time]()
	counter int
)

// fill sets v, and every field YAML sees inside it, to a non-zero value of
// its type: a pointer gets a value, a list two items, a map one key, a
// string "vN" (N counts, so that no two values are alike).
func fill(v reflect.Value) {
	counter++
	n := counter
	if v.Type() == timeT {
		v.Set(reflect.ValueOf(schema.NewTime(time.Date(2026, 1, 2, 3, 4, 5, n*1000, time.UTC))))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if visible(v.Type().Field(i)) {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(v.Index(0))
		fill(v.Index(1))
	case reflect.Map:
		k, x := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(x)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(k, x)
	case reflect.Interface:
		v.Set(reflect.ValueOf(fmt.Sprintf("v%d", n)))
	case reflect.String:
		v.SetString(fmt.Sprintf("v%d", n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(n) + 0.5)
	default:
		panic("fill: no value for " + v.Type().String())
	}
}

// visible reports whether YAML sees f (Body is the file's body instead).
func visible(f reflect.StructField) bool { return f.IsExported() && f.Tag.Get("yaml") != "-" }

// requireFilled fails for any field fill left zero (fill's own check).
func requireFilled(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	if v.IsZero() {
		t.Fatalf("fill left %s zero", path)
	}
	switch v.Kind() {
	case reflect.Pointer:
		requireFilled(t, v.Elem(), path)
	case reflect.Slice:
		for i := range v.Len() {
			requireFilled(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Struct:
		if v.Type() == timeT {
			return
		}
		for i := range v.NumField() {
			if f := v.Type().Field(i); visible(f) {
				requireFilled(t, v.Field(i), path+"."+f.Name)
			}
		}
	}
}

// decodeFrontMatter decodes a file the encoder wrote into v without the
// protocol's validation (the values fill makes are not valid ids, providers
// and so on), and returns the body.
func decodeFrontMatter(t *testing.T, b []byte, v any) string {
	t.Helper()
	rest, ok := bytes.CutPrefix(b, []byte("---\n"))
	i := bytes.Index(rest, []byte("\n---\n"))
	if !ok || i < 0 {
		t.Fatalf("not a front matter file:\n%s", b)
	}
	if err := schema.DecodeYAML(rest[:i+1], v); err != nil {
		t.Fatalf("decoding what the encoder wrote: %v\n%s", err, b)
	}
	return string(rest[i+5:])
}

var cmpTime = cmp.Comparer(func(a, b schema.Time) bool { return a.Equal(b.Time) && a.Location() == b.Location() })

func roundTripMessage(t *testing.T, m *schema.Message) {
	t.Helper()
	b, err := schema.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	var got schema.Message
	got.Body = decodeFrontMatter(t, b, &got)
	if !reflect.DeepEqual(&got, m) {
		t.Errorf("the message did not come back (-wrote +read):\n%s\nfile:\n%s", cmp.Diff(m, &got, cmpTime), b)
	}
	// And the file is a fixed point of the encoder.
	if b2, err := schema.Encode(&got); err != nil || !bytes.Equal(b, b2) {
		t.Errorf("re-encoding differs (%v):\n%s\n---\n%s", err, b, b2)
	}
}

// A message with every field set, metadata.extra's included, is written
// by the emitter and read back equal.
func TestEncodeEveryMessageField(t *testing.T) {
	var m schema.Message
	fill(reflect.ValueOf(&m).Elem())
	requireFilled(t, reflect.ValueOf(m), "Message")
	m.Body = "the body\n"
	roundTripMessage(t, &m)
}

// Each field of metadata.extra, set alone, makes Extra non-zero (else the
// emitter would leave metadata.extra out) and is written and read back.
func TestExtraEachFieldAlone(t *testing.T) {
	eachFieldAlone(t, func(t *testing.T, e schema.Extra) {
		var m schema.Message
		fill(reflect.ValueOf(&m).Elem())
		m.Metadata.Extra = e
		roundTripMessage(t, &m)
	})
}

// The draft's structs with an IsZero of their own: each field set alone
// makes the struct non-zero (yaml.v3 leaves out what IsZero calls zero).
func TestDraftIsZeroEachFieldAlone(t *testing.T) {
	eachFieldAlone(t, func(t *testing.T, c schema.DraftContent) {
		roundTripDraft(t, &schema.Draft{Content: c})
	})
	eachFieldAlone(t, func(t *testing.T, o schema.Options) {
		roundTripDraft(t, &schema.Draft{Options: o})
	})
}

// eachFieldAlone sets each field of a T alone, requires IsZero to be false
// and hands the T to check.
func eachFieldAlone[T interface{ IsZero() bool }](t *testing.T, check func(*testing.T, T)) {
	var zero T
	if !zero.IsZero() {
		t.Fatalf("%T{}.IsZero() = false", zero)
	}
	ty := reflect.TypeFor[T]()
	for i := range ty.NumField() {
		f := ty.Field(i)
		if !visible(f) {
			continue
		}
		t.Run(ty.Name()+"."+f.Name, func(t *testing.T) {
			var x T
			fill(reflect.ValueOf(&x).Elem().Field(i))
			if x.IsZero() {
				t.Fatalf("%T with only %s set: IsZero() = true, so it would not be written", x, f.Name)
			}
			check(t, x)
		})
	}
}

func roundTripDraft(t *testing.T, d *schema.Draft) {
	t.Helper()
	b, err := schema.EncodeDraft(d)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := schema.ParseDraft(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(got, d) {
		t.Errorf("the draft did not come back (-wrote +read):\n%s\nfile:\n%s", cmp.Diff(d, got, cmpTime), b)
	}
}

// A draft with every field set (delivery and email headers included) is
// written and read back equal.
func TestEncodeEveryDraftField(t *testing.T) {
	var d schema.Draft
	fill(reflect.ValueOf(&d).Elem())
	requireFilled(t, reflect.ValueOf(d), "Draft")
	d.Body = "the body\n"
	roundTripDraft(t, &d)
	if b, _ := schema.EncodeDraft(&d); !strings.Contains(string(b), "delivery:") {
		t.Errorf("no delivery in:\n%s", b)
	}
}
