#!/bin/bash
mkdir -p /app/scripts && printf '%s\n' '#!/bin/bash' 'echo $(( $1 + $2 ))' > /app/scripts/move_nutmeg.sh && chmod +x /app/scripts/move_nutmeg.sh
