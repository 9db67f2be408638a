#!/bin/bash
mkdir -p /app/scripts && printf '%s\n' '#!/bin/bash' 'for a in "$@"; do echo "${a^^}"; done' > /app/scripts/parse_candle.sh && chmod +x /app/scripts/parse_candle.sh
