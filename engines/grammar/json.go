package grammar

// The JSON pieces every JSON grammar here shares. They keep what a random or careless model can
// make finite where JSON itself is not, so that the text always parses as well as matches:
//
//   - whitespace is at most one blank, or a newline and up to 20 blanks or tabs (indentation),
//     after { [ : and , and before } and ]; none before or after the whole value;
//   - a number's integer part has at most 16 digits, its fraction at most 16 and its exponent
//     at most 2 (so that every number fits a float64: encoding/json refuses 1e999);
//   - a string's \u escapes name no surrogate, so that each character of a string, escaped or
//     not, is one code point (what JSON Schema's minLength and maxLength count).
const jsonCommon = `
ws      ::= ( " " | "\n" [ \t]{0,20} )?
string  ::= "\"" char* "\""
char    ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" hex4 )
hex4    ::= ( [0-9a-cA-C] hex hex hex | [dD] [0-7] hex hex | [eEfF] hex hex hex )
hex     ::= [0-9a-fA-F]
number  ::= integer ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?
integer ::= "-"? ( "0" | [1-9] [0-9]{0,15} )
boolean ::= "true" | "false"
null    ::= "null"
value   ::= object | array | string | number | boolean | null
object  ::= "{" ws ( member ( "," ws member )* )? "}"
member  ::= string ws ":" ws value ws
array   ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
`

// JSONObject is the GBNF grammar of any JSON object (OpenAI's response_format json_object), with
// the limits jsonCommon sets.
const JSONObject = "root ::= object\n" + jsonCommon

// JSONValue is the GBNF grammar of any JSON value, with the limits jsonCommon sets.
const JSONValue = "root ::= value\n" + jsonCommon
