package main

// Every generated family, registered with runtime/model (go generate writes the registry from
// graphs/*.graph) and with the contract.
import _ "tfc/contracts/registered"
