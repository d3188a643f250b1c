package engine

import "testing"

// TestInternTableAnswersTheNameAsked: whatever the recent-id slots hold
// (names sharing a slot, an id given to another name after eviction), the
// id returned for a name is the table's id of that name, or otherID when
// the table is full of names too young to evict.
func TestInternTableAnswersTheNameAsked(t *testing.T) {
	type lookup struct {
		name      string
		now       int64
		wantOther bool
	}
	for _, tc := range []struct {
		name    string
		max     int
		minAge  int64
		lookups []lookup
	}{
		{"names sharing a slot keep their own ids", 8, 0, []lookup{
			{name: "axb"}, {name: "ayb"}, {name: "axb"}, {name: "ayb"}, {name: "azb"}, {name: "axb"},
		}},
		{"an id given to another name no longer answers for the old one", 1, 0, []lookup{
			{name: "axb", now: 1}, {name: "ayb", now: 2}, {name: "axb", now: 3}, {name: "ayb", now: 4},
		}},
		{"a full table of young names answers (other), then evicts", 1, 10, []lookup{
			{name: "axb", now: 1}, {name: "ayb", now: 2, wantOther: true}, {name: "axb", now: 3}, {name: "ayb", now: 20},
		}},
		{"a tool named like the overflow id gets its own id", 4, 0, []lookup{
			{name: otherName}, {name: "read_file"}, {name: otherName},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tab internTable
			tab.init(tc.max, tc.minAge)
			for i, l := range tc.lookups {
				id := tab.id(l.name, l.now)
				if l.wantOther {
					if id != otherID {
						t.Fatalf("lookup %d (%q): id %d, want otherID", i, l.name, id)
					}
					continue
				}
				if id == otherID || tab.name(id) != l.name || tab.ids[l.name] != id {
					t.Fatalf("lookup %d (%q): id %d names %q (table id %d)", i, l.name, id, tab.name(id), tab.ids[l.name])
				}
			}
		})
	}
}
