package service

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/stream"
)

// Configuration errors speak the file's language: every message names the
// setting by its YAML key, dotted from the top of the file
// (stream.batch_size), never by a Go field or type. The packages the
// service configures name their Config fields; the functions here put
// their messages in the file's terms, so every message has one style:
// "<key> must …, got …" or "line N: <key>: …".

// streamDurationKeys are the YAML names of stream.Config's durations,
// which the file gives in whole units of the name.
var streamDurationKeys = map[string]string{
	"BatchWait": "batch_wait_ms", "Block": "block_ms", "PollInterval": "poll_interval_ms", "IdleTimeout": "idle_timeout_seconds",
	"StartConsumerMinInterval": "start_consumer_min_interval_ms",
	"StopConsumerMinInterval":  "stop_consumer_min_interval_ms",
	"ReclaimMinIdle":           "reclaim_min_idle_ms", "ReclaimInterval": "reclaim_interval_ms",
	"HandlerTimeout": "handler_timeout_ms", "LeaseTTL": "lease_ttl_ms",
}

// fieldKeys maps the Go names of t's fields, bare (Length) and qualified
// by their type (CodeConfig.Length), to their dotted YAML keys under
// section, through nested structs; extra adds names of fields without a
// YAML tag.
func fieldKeys(section string, t reflect.Type, extra map[string]string) map[string]string {
	keys := map[string]string{}
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "-" || name == "" {
				name = extra[f.Name]
			}
			if name == "" || !f.IsExported() {
				continue
			}
			key := prefix + "." + name
			keys[t.Name()+"."+f.Name] = key
			if _, dup := keys[f.Name]; !dup {
				keys[f.Name] = key
			}
			if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() != "time" {
				walk(key, f.Type)
			}
		}
	}
	walk(section, t)
	return keys
}

var (
	streamKeys = fieldKeys("stream", reflect.TypeFor[stream.Config](), streamDurationKeys)
	issueKeys  = fieldKeys("issue", reflect.TypeFor[issue.Config](), nil)
	goName     = regexp.MustCompile(`\b(?:[A-Z][A-Za-z0-9]*\.)*[A-Z][A-Za-z0-9]*\b`)
)

// inFileTerms rewrites a validation error of the package behind section
// ("stream: BatchSize must be at least 1, got 0") with the YAML keys of
// the fields it names ("stream.batch_size must be at least 1, got 0").
func inFileTerms(section string, keys map[string]string, err error) error {
	if err == nil {
		return nil
	}
	msg, _ := strings.CutPrefix(err.Error(), section+": ")
	msg = goName.ReplaceAllStringFunc(msg, func(name string) string {
		for n := name; n != ""; {
			if k, ok := keys[n]; ok {
				return k
			}
			if strings.HasPrefix(n, "Config.") {
				n = strings.TrimPrefix(n, "Config.")
				continue
			}
			break
		}
		return name
	})
	return errors.New(msg)
}

// unmarshalError is one line of a yaml.v3 decoding error.
var (
	cannotUnmarshal = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
	fieldNotFound   = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)
	streamUnknown   = regexp.MustCompile(`^stream config: line (\d+): unknown key "(.*)"$`)
)

// decodeError puts a YAML decoding error of the file src in the file's
// terms: the line, the dotted key and what the key wants, without the Go
// types yaml.v3 names.
func decodeError(src []byte, err error) error {
	var root yaml.Node
	if yaml.Unmarshal(src, &root) != nil {
		return err // a syntax error: yaml's own message names the line
	}
	paths := keyLines(&root)
	text := strings.TrimPrefix(err.Error(), "stream config: ")
	text = strings.TrimPrefix(text, "yaml: unmarshal errors:\n")
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if m := streamUnknown.FindStringSubmatch("stream config: " + line); m != nil {
			out = append(out, fmt.Sprintf("line %s: %s: unknown key", m[1], paths.key(m[1], m[2])))
		} else if m := fieldNotFound.FindStringSubmatch(line); m != nil {
			out = append(out, fmt.Sprintf("line %s: %s: unknown key", m[1], paths.key(m[1], m[2])))
		} else if m := cannotUnmarshal.FindStringSubmatch(line); m != nil {
			got := yamlKind(m[2])
			if m[3] != "" {
				got = strconv.Quote(m[3])
			}
			out = append(out, fmt.Sprintf("line %s: %s: want %s, got %s", m[1], paths.key(m[1], ""), wants(m[4]), got))
		} else if line != "" {
			out = append(out, line)
		}
	}
	return errors.New(strings.Join(out, "; "))
}

// lineKeys holds the dotted keys of a YAML document by the line they are on.
type lineKeys map[int][]string

// key is the key on line (a string) whose last part is name, or without a
// name the outermost key on line: the one whose value a decoding error on
// that line is about.
func (l lineKeys) key(line, name string) string {
	n, _ := strconv.Atoi(line)
	for _, k := range l[n] {
		if name == "" || strings.HasSuffix(k, "."+name) || k == name {
			return k
		}
	}
	if name != "" {
		return name
	}
	return "a setting"
}

// keyLines lists the dotted keys of the document under root by line.
func keyLines(root *yaml.Node) lineKeys {
	l := lineKeys{}
	var walk func(prefix string, n *yaml.Node)
	walk = func(prefix string, n *yaml.Node) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(prefix, c)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				key := k.Value
				if prefix != "" {
					key = prefix + "." + k.Value
				}
				l[k.Line] = append(l[k.Line], key)
				walk(key, v)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				key := fmt.Sprintf("%s[%d]", prefix, i)
				l[c.Line] = append(l[c.Line], key)
				walk(key, c)
			}
		}
	}
	walk("", root)
	return l
}

// yamlKind names a YAML tag as the file's author sees it.
func yamlKind(tag string) string {
	switch tag {
	case "seq":
		return "a list"
	case "map":
		return "a mapping"
	case "null":
		return "nothing"
	}
	return "a " + tag
}

// wants says what a Go type yaml.v3 names takes, in words.
func wants(goType string) string {
	switch {
	case goType == "time.Duration":
		return "a duration such as 30s, 15m or 168h"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "text"
	case goType == "stream.ReadMode":
		return fmt.Sprintf("%s or %s", stream.ReadBlock, stream.ReadPoll)
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	}
	return "a mapping"
}

// edgeInFileTerms writes the edge's "edge: rate_limits.user…" as the dotted
// key "edge.rate_limits.user…" (the edge already names its YAML keys).
func edgeInFileTerms(err error) error {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "edge: "); ok && rest != "" && rest[0] >= 'a' && rest[0] <= 'z' {
		return errors.New("edge." + rest)
	}
	return err
}

// streamZeroRefused are the keys of the `stream:` section whose zero the
// stream package takes for "the default" (its Config's zero value) while
// its check refuses zero, with what the check wants. A 0 written in the
// file is refused in those words rather than silently made the default;
// a key left out still gets the default.
var streamZeroRefused = map[string]string{
	"batch_size": "must be at least 1", "block_ms": "must be at least 1", "poll_interval_ms": "must be at least 1",
	"min_consumers_per_instance": "must be at least 1", "max_consumers_per_instance": "must be at least 1",
	"consecutive_active_trigger": "must be at least 1", "consecutive_idle_trigger": "must be at least 1",
	"reclaim_min_idle_ms": "must be at least 1", "reclaim_interval_ms": "must be at least 1",
	"max_deliveries": "must be at least 1", "dead_letter_max_len": "must be positive, or -1 for no bound",
	"handler_timeout_ms": "must be positive", "max_blocking_conns": "must be at least 1", "lease_ttl_ms": "must be at least 3",
}

// checkStreamZeros refuses the first key of the file src's `stream:`
// section that streamZeroRefused names and that is given as 0:
// "stream.batch_size must be at least 1, got 0".
func checkStreamZeros(src []byte) error {
	var root yaml.Node
	if yaml.Unmarshal(src, &root) != nil || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil // a syntax error or an empty file: reported, or fine, elsewhere
	}
	top := root.Content[0].Content
	for i := 0; i+1 < len(top); i += 2 {
		if top[i].Value != "stream" || top[i+1].Kind != yaml.MappingNode {
			continue
		}
		sec := top[i+1].Content
		for j := 0; j+1 < len(sec); j += 2 {
			key, v := sec[j].Value, sec[j+1]
			want, ok := streamZeroRefused[key]
			var n int64
			if ok && v.Kind == yaml.ScalarNode && v.Decode(&n) == nil && n == 0 {
				return fmt.Errorf("stream.%s %s, got 0", key, want)
			}
		}
	}
	return nil
}
