package constrain

import (
	"fmt"
	"net/url"
	"strings"
)

// ref compiles a $ref. Every reference to one schema gets the same node,
// and that schema is compiled once, so a recursive schema becomes a cycle
// in the graph (never an expansion) and the work stays linear in the
// schema's size.
func (c *compiler) ref(r any, at *path) (*node, error) {
	ref, ok := r.(string)
	if !ok {
		return nil, fmt.Errorf("constrain: %s/$ref: want a string", at)
	}
	c.hasRef = true
	key, target, err := c.lookup(ref, at)
	if err != nil {
		return nil, err
	}
	return c.refTo(key, target, ref)
}

// refTo returns the kRef node of the schema target (key names it), and
// compiles target the first time. The node is in the cache before target
// is compiled, so that a cycle back to it ends there.
func (c *compiler) refTo(key string, target any, at string) (*node, error) {
	if n, ok := c.refs[key]; ok {
		return n, nil
	}
	n, err := c.add(&node{kind: kRef})
	if err != nil {
		return nil, err
	}
	c.refs[key] = n
	c.refAt[n] = at
	if n.target, err = c.compile(target, &path{seg: at}); err != nil {
		return nil, err
	}
	return n, nil
}

// lookup finds the schema a local $ref names: # (the whole schema),
// #/$defs/NAME or #/definitions/NAME, the fragment percent-encoded or not
// and NAME with JSON pointer escapes (~0 for ~, ~1 for /). It returns a
// key that names the schema whatever the spelling.
func (c *compiler) lookup(ref string, at *path) (key string, target any, err error) {
	refuse := func(why string) (string, any, error) {
		return "", nil, fmt.Errorf("%w: %s/$ref: %q: %s", ErrUnsupported, at, ref, why)
	}
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return refuse("only references within the schema (#, #/$defs/… and #/definitions/…)")
	}
	frag, err = url.PathUnescape(frag)
	if err != nil {
		return refuse("not a valid URI fragment")
	}
	if frag == "" {
		return "#", c.doc, nil
	}
	section, name, ok := strings.Cut(strings.TrimPrefix(frag, "/"), "/")
	if !ok || frag[0] != '/' || section != "$defs" && section != "definitions" || strings.Contains(name, "/") {
		return refuse("only #, #/$defs/NAME and #/definitions/NAME")
	}
	name, ok = unescapePointer(name)
	if !ok {
		return refuse("a ~ not followed by 0 or 1")
	}
	var defs *obj
	if root, ok := c.doc.(*obj); ok {
		defs, _ = root.m[section].(*obj)
	}
	if defs == nil {
		return refuse("the schema has no " + section)
	}
	target, found := defs.m[name]
	if !found {
		return refuse(fmt.Sprintf("no %s named %q", section, name))
	}
	return section + "/" + name, target, nil
}

// unescapePointer decodes a JSON pointer token: ~1 is /, ~0 is ~.
func unescapePointer(s string) (string, bool) {
	if !strings.Contains(s, "~") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '~' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) || s[i+1] != '0' && s[i+1] != '1' {
			return "", false
		}
		b.WriteByte("~/"[s[i+1]-'0'])
		i++
	}
	return b.String(), true
}

// link makes the graph final: every pointer to a kRef node goes to the
// node of the schema it names, the unions get their pick tables and every
// node its minDepth. It returns the root's node, or an error if the root
// has no finite value or none within MaxDepth.
func (c *compiler) link(root *node) (*node, error) {
	for _, n := range c.nodes {
		if n.kind == kRef {
			if err := c.resolve(n); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range c.nodes {
		for i := range n.props {
			n.props[i].node = final(n.props[i].node)
		}
		for i := range n.alts {
			n.alts[i] = final(n.alts[i])
		}
		n.items = final(n.items)
	}
	root = final(root)
	if err := c.checkUnions(); err != nil {
		return nil, err
	}
	c.measure()
	switch d := root.minDepth; {
	case d == unbounded:
		return nil, fmt.Errorf("%w: no finite value satisfies the schema (a $ref recursion that every value must take, with no way to end)", ErrUnsupported)
	case d > MaxDepth:
		return nil, fmt.Errorf("%w: every value nests %d deep, which exceeds the output nesting limit of %d", ErrLimit, d, MaxDepth)
	}
	return root, nil
}

// final is the node a pointer to n stands for once references are
// resolved.
func final(n *node) *node {
	if n != nil && n.kind == kRef {
		return n.target
	}
	return n
}

// resolve points kRef node r at the first node along its chain of
// references that is not one, and the kRefs on the way too, so that each
// is walked once. A chain that comes back to itself names no schema.
func (c *compiler) resolve(r *node) error {
	end := r
	for steps := 0; end.kind == kRef; steps++ {
		if steps > len(c.refs) {
			return fmt.Errorf("%w: $ref %q goes round a cycle of references with no schema in between, so no value could be written", ErrUnsupported, c.refAt[r])
		}
		end = end.target
	}
	for n := r; n.kind == kRef; {
		next := n.target
		n.target = end
		n = next
	}
	return nil
}
