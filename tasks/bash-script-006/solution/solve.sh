#!/bin/bash
mkdir -p /app/scripts && printf '%s\n' '#!/bin/bash' 'echo $(( $1 + $2 ))' > /app/scripts/sync_quill.sh && chmod +x /app/scripts/sync_quill.sh
