#!/bin/bash
sed -i 's/^port=.*/port=2435/' /app/etc/wild_robin.conf
