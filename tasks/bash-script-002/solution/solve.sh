#!/bin/bash
mkdir -p /app/scripts && printf '%s\n' '#!/bin/bash' 'echo $(( $1 * $2 ))' > /app/scripts/write_yarrow.sh && chmod +x /app/scripts/write_yarrow.sh
