#!/bin/bash
mkdir -p /app/scripts && printf '%s\n' '#!/bin/bash' 'echo $(( $1 + $2 ))' > /app/scripts/push_crow.sh && chmod +x /app/scripts/push_crow.sh
