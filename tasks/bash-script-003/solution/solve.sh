#!/bin/bash
mkdir -p /app/scripts && printf '%s\n' '#!/bin/bash' 'echo $(( $1 * $2 ))' > /app/scripts/load_thistle.sh && chmod +x /app/scripts/load_thistle.sh
