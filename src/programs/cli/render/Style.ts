/**
 * Terminal styling for the CLI's renderers: ANSI colours and weights as plain string functions, identity
 * functions when colour is off (callers turn colour on only for a TTY).
 */

/** Styling: identity functions when colour is off. */
export interface Style {
  readonly dim: (text: string) => string
  readonly bold: (text: string) => string
  readonly red: (text: string) => string
  readonly green: (text: string) => string
  readonly yellow: (text: string) => string
  readonly cyan: (text: string) => string
}

const sgr = (open: number, close: number) => (text: string) => text === "" ? text : `\x1b[${open}m${text}\x1b[${close}m`

/** ANSI styling when `color`, plain text otherwise. */
export const style = (color: boolean): Style =>
  color
    ? {
      dim: sgr(2, 22),
      bold: sgr(1, 22),
      red: sgr(31, 39),
      green: sgr(32, 39),
      yellow: sgr(33, 39),
      cyan: sgr(36, 39)
    }
    : { dim: id, bold: id, red: id, green: id, yellow: id, cyan: id }

const id = (text: string) => text
