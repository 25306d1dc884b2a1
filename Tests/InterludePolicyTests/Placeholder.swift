import Testing
@Test func placeholder_InterludePolicyTests() { #expect(Bool(true)) }
