// Package layers holds the test that checks the layering of TokenRouter's
// packages (DESIGN §7: packages import only downward): every import of
// every package against the layer table in its test.
package layers
