#!/bin/bash
sed -i 's/^workers=.*/workers=6762/' /app/etc/smooth_anchor.conf
