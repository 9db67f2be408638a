#!/bin/bash
sed -i 's/^workers=.*/workers=4517/' /app/etc/hidden_robin.conf
