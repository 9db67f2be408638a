#!/bin/bash
cd /app && tar czf /app/humble-pebble.tar.gz poppy/*.cfg
