// Package tools holds the project's tests that need heavy dependencies
// (helm, the Kubernetes API types), in a module of its own so that the
// worker's module never takes them.
package tools
