package main

// Every generated family, registered with runtime/model and the contract (go generate writes the
// registry from graphs/*.graph).
import _ "tfc/gen/registry"
