package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/streamproc/processor/cmd/eoscheck/check"
)

// inputValue is the JSON value of an input record; Pad and Half only
// with -value-format avro (nearlimit's pad, and the input schema's
// second version's field), left out when zero.
type inputValue struct {
	Key  string `json:"key"`
	Seq  int    `json:"seq"`
	Pad  string `json:"pad,omitempty"`
	Half int    `json:"half,omitempty"`
}

// The sizes of the marked inputs: nearlimit values are drawn between
// nearLimitMin and nearLimitMax bytes, so that the output (jq's
// `.seen = true` adds 12 bytes, the lineage headers about 100, the batch
// framing about 100) still fits Kafka's default max.message.bytes,
// 1048588; bignumDigits is the length of the jsonb class's integer, past
// the 131,072 digits before the point that PostgreSQL's numeric holds
// (gojq keeps such an integer as it is).
const (
	nearLimitMin = 1_000_000
	nearLimitMax = 1_048_000
	bignumDigits = 140_000
)

// poisonVariants are the variants of each class, which come in rounds of
// each once in an order drawn by the seed; surrogate (a lone UTF-16
// surrogate escape, which jsonb refuses) only without jq, which turns it
// into U+FFFD.
var poisonVariants = map[check.Class][]string{
	check.NotJSON:      {"text", "truncated", "binary"},
	check.NearLimit:    {"pad"},
	check.JSONBRefused: {"bignum", "nul", "surrogate"},
}

// poisonInput returns the value of variant v of the marked input seq (key
// its key), by class:
//
//   - notjson: plain text, a JSON object cut short, or bytes that are not
//     UTF-8; the jq transform fails each.
//   - nearlimit: {"key":…,"seq":…,"pad":"…"} of nearLimitMin to
//     nearLimitMax bytes, the pad random letters and digits (so that
//     compression does not hide the size from the broker).
//   - jsonb: {"key":…,"seq":…,"poison":…} with an integer of bignumDigits
//     digits, a string with an escaped NUL, or (without jq) a lone
//     surrogate escape; eoscheck finds the poison member verbatim in the
//     row's value_bytes.
func poisonInput(rng *rand.Rand, v string, key string, seq int) []byte {
	head := fmt.Sprintf(`{"key":%q,"seq":%d,`, key, seq)
	switch v {
	case "text":
		return []byte("not JSON: " + key)
	case "truncated":
		return []byte(head + `"cut":`)
	case "binary":
		return append([]byte{0xff, 0xfe, 0x00, 0x80}, key...)
	case "pad":
		size := nearLimitMin + rng.IntN(nearLimitMax-nearLimitMin+1)
		b := make([]byte, 0, size)
		b = append(b, head+`"pad":"`...)
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
		for len(b) < size-2 {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
		return append(b, `"}`...)
	case "bignum":
		b := make([]byte, 0, len(head)+bignumDigits+20)
		b = append(b, head+`"`+check.PoisonField+`":`...)
		b = append(b, byte('1'+rng.IntN(9)))
		for range bignumDigits - 1 {
			b = append(b, byte('0'+rng.IntN(10)))
		}
		return append(b, '}')
	case "nul":
		return []byte(head + `"` + check.PoisonField + `":"nul \u0000 byte"}`)
	default: // surrogate
		return []byte(head + `"` + check.PoisonField + `":"lone \ud800 surrogate"}`)
	}
}
