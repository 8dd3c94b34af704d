// Package pathfuzz holds only a test: FuzzPathsOnEveryBackend runs the
// same paths against memorytopo and real etcd, ZooKeeper and Consul
// servers, and checks that every backend refuses the same paths (with
// InvalidPath, writing nothing) and stores and reads back every other one
// byte for byte. It lives apart from package topo so that it can import
// every backend and their test servers without an import cycle.
package pathfuzz
