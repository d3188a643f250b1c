package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// shopRepo is the scratch repository every corpus session works in: a
// small Go module with real bugs its tests catch, a long data file to page
// through and a slow job to poll.
//
//nolint:funlen // a repository as one literal: its files, not steps
func shopRepo() map[string]string {
	var orders strings.Builder
	orders.WriteString("id,sku,qty,status\n")
	statuses := []string{"shipped", "shipped", "pending", "refunded", "shipped", "cancelled"}
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&orders, "%d,SKU-%03d,%d,%s\n", 1000+i, (i*37)%120, 1+(i*7)%5, statuses[(i*11)%len(statuses)])
	}
	return map[string]string{
		"go.mod":    "module example.com/shop\n\ngo 1.22\n",
		"README.md": "# shop\n\nCart, inventory and text helpers for the shop backend.\n\nRun `go test ./...`; `scripts/report.sh` builds the sales report.\n",
		"cart/cart.go": `package cart

// Item is one line of a cart; Price is in cents.
type Item struct {
	SKU   string
	Price int
	Qty   int
}

// Cart holds the items a customer picked.
type Cart struct{ Items []Item }

// Add puts an item in the cart, merging lines of the same SKU.
func (c *Cart) Add(it Item) {
	for i := range c.Items {
		if c.Items[i].SKU == it.SKU {
			c.Items[i].Qty = it.Qty
			return
		}
	}
	c.Items = append(c.Items, it)
}

// Total is the price of everything in the cart, in cents.
func (c *Cart) Total() int {
	t := 0
	for _, it := range c.Items {
		t += it.Price
	}
	return t
}

// Discount takes pct percent off a total, rounding down.
func Discount(total, pct int) int {
	return total - total*pct/10
}

// TODO: taxes per region.
`,
		"cart/cart_test.go": `package cart

import "testing"

func TestAddMerges(t *testing.T) {
	var c Cart
	c.Add(Item{SKU: "a", Price: 100, Qty: 1})
	c.Add(Item{SKU: "a", Price: 100, Qty: 2})
	if len(c.Items) != 1 || c.Items[0].Qty != 3 {
		t.Errorf("Add: got %+v, want one line of 3", c.Items)
	}
}

func TestTotal(t *testing.T) {
	c := Cart{Items: []Item{{SKU: "a", Price: 250, Qty: 2}, {SKU: "b", Price: 100, Qty: 1}}}
	if got := c.Total(); got != 600 {
		t.Errorf("Total = %d, want 600", got)
	}
}

func TestDiscount(t *testing.T) {
	if got := Discount(1000, 15); got != 850 {
		t.Errorf("Discount(1000, 15) = %d, want 850", got)
	}
}
`,
		"inventory/inventory.go": `package inventory

import "sort"

// Stock counts items by SKU.
type Stock map[string]int

// Take removes n of sku and reports whether there were enough.
func (s Stock) Take(sku string, n int) bool {
	if s[sku] <= n {
		return false
	}
	s[sku] -= n
	return true
}

// Restock adds n of sku.
func (s Stock) Restock(sku string, n int) {
	s[sku] = n
}

// Low lists the SKUs with fewer than min left, sorted.
func (s Stock) Low(min int) []string {
	var out []string
	for k, v := range s {
		if v < min {
			out = append(out, k)
		}
	}
	return out
}

// SKUs lists every SKU, sorted.
func (s Stock) SKUs() []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
`,
		"inventory/inventory_test.go": `package inventory

import (
	"reflect"
	"testing"
)

func TestTakeAll(t *testing.T) {
	s := Stock{"a": 2}
	if !s.Take("a", 2) || s["a"] != 0 {
		t.Errorf("Take all: got %v", s)
	}
}

func TestRestockAdds(t *testing.T) {
	s := Stock{"a": 2}
	s.Restock("a", 3)
	if s["a"] != 5 {
		t.Errorf("Restock: got %d, want 5", s["a"])
	}
}

func TestLowSorted(t *testing.T) {
	s := Stock{"d": 1, "c": 0, "b": 9, "a": 1, "e": 0, "f": 1}
	if got := s.Low(2); !reflect.DeepEqual(got, []string{"a", "c", "d", "e", "f"}) {
		t.Errorf("Low = %v", got)
	}
}
`,
		"textutil/slug.go": `package textutil

import "strings"

// Slug lowercases s and joins its words with dashes.
func Slug(s string) string {
	return strings.Join(strings.Fields(s), "-")
}

// Truncate cuts s to n runes, adding an ellipsis when it cuts.
func Truncate(s string, n int) string {
	r := []rune(s)
	if len(r) < n {
		return s
	}
	return string(r[:n]) + "…"
}
`,
		"textutil/slug_test.go": `package textutil

import "testing"

func TestSlug(t *testing.T) {
	if got := Slug("Red  Apple Pie"); got != "red-apple-pie" {
		t.Errorf("Slug = %q", got)
	}
}

func TestTruncateExact(t *testing.T) {
	if got := Truncate("apple", 5); got != "apple" {
		t.Errorf("Truncate = %q", got)
	}
}
`,
		"report/report.go": `package report

import "strconv"

func itoa(n int) string { return strconv.Itoa(n) }

// Header is the report's first line.
func Header() string { return "sales report" }
`,
		"scripts/report.sh": `#!/bin/sh
# Builds the sales report slowly: a step a second.
steps=${1:-5}
i=1
while [ "$i" -le "$steps" ]; do
	echo "step $i/$steps: aggregated $((i * 100)) orders"
	sleep 1
	i=$((i + 1))
done
echo "report done: $((steps * 100)) orders"
`,
		"data/orders.csv": orders.String(),
		"data/issues.txt": "12 open flaky cart test\n7 open discount rounding\n31 open slug of unicode names\n4 open restock race\n",
	}
}

// shopBug is a package's bugs: the edits that fix them, one per failing
// test, and an edit that fixes nothing.
type shopBug struct {
	file, test string
	fixes      [][2]string
	wrong      [2]string
}

var shopBugs = map[string]shopBug{
	"cart": {file: "cart/cart.go", test: "cart/cart_test.go", fixes: [][2]string{
		{"c.Items[i].Qty = it.Qty", "c.Items[i].Qty += it.Qty"},
		{"t += it.Price\n", "t += it.Price * it.Qty\n"},
		{"total*pct/10\n", "total*pct/100\n"},
	}, wrong: [2]string{"// Discount takes pct percent off a total, rounding down.", "// Discount takes pct percent off a total, rounding down (integer cents)."}},
	"inventory": {file: "inventory/inventory.go", test: "inventory/inventory_test.go", fixes: [][2]string{
		{"if s[sku] <= n {", "if s[sku] < n {"},
		{"s[sku] = n\n", "s[sku] += n\n"},
		{"\t}\n\treturn out\n}\n\n// SKUs", "\t}\n\tsort.Strings(out)\n\treturn out\n}\n\n// SKUs"},
	}, wrong: [2]string{"// Restock adds n of sku.", "// Restock adds n of sku to the stock."}},
	"textutil": {file: "textutil/slug.go", test: "textutil/slug_test.go", fixes: [][2]string{
		{`return strings.Join(strings.Fields(s), "-")`, `return strings.ToLower(strings.Join(strings.Fields(s), "-"))`},
		{"if len(r) < n {", "if len(r) <= n {"},
	}, wrong: [2]string{"// Slug lowercases s", "// Slug lower-cases s"}},
}

var shopSources = []string{
	"cart/cart.go", "cart/cart_test.go", "inventory/inventory.go", "inventory/inventory_test.go",
	"textutil/slug.go", "textutil/slug_test.go", "report/report.go", "README.md", "scripts/report.sh", "go.mod",
}

var shopPatterns = []string{"func ", "TODO", "Price", `strings\.`, "return", "Stock", "sku", "package ", "import", `t\.Errorf`, "sort", "Qty"}

// writeShopRepo writes shopRepo into dir and commits it.
func writeShopRepo(t *testing.T, dir string) {
	t.Helper()
	for name, content := range shopRepo() {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=dev", "-c", "user.email=dev@example.com", "commit", "-qm", "shop: cart, inventory, text helpers"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}
