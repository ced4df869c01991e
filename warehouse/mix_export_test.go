package warehouse

// Mix64 is the order's finaliser, for the external tests of mixtures.
var Mix64 = mix64
