// Package layers holds the test that keeps the module's package graph
// layered (docs/architecture.md): no package imports a higher layer,
// nothing outside cmd/ imports cmd/ (tests and the nested chartcheck module
// included), and the top-level folders form no import cycle. It has no
// code of its own.
package layers
